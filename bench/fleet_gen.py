#!/usr/bin/env python3
"""Session files for bench/fleet.sh, written the way agents write them.

  fleet_gen.py corpus DIR FILES PER_DIR LINES [SERIES]
                                                FILES job directories of PER_DIR files each,
                                                LINES cortex-spike lines in all; job ids of
                                                SERIES (0-255, default 0): corpora of two
                                                series share no job and no path
  fleet_gen.py idle DIR FILES                   FILES job directories of one one-line file each
  fleet_gen.py append DIR MARKER FILES LINES RATE
                                                LINES lines appended round-robin over FILES
                                                files at RATE lines a second, each carrying its
                                                append time (appended_us) and MARKER
"""
import json
import os
import sys
import time

TYPES = ["LLM_REQUEST", "LLM_RESPONSE", "TOOL_START", "TOOL_RESULT", "CHECKPOINT_WRITTEN"]


def job_id(n, series=0):
    return "0193a8b2-7c41-7d2e-%04x-%012d" % (0x9F00 + series, n)


def spike_line(job, g):
    t = TYPES[g % 5]
    doc = {
        "type": t,
        "timestamp": "2026-02-23T14:%02d:%02d.%03dZ" % ((g // 60000) % 60, (g // 1000) % 60, g % 1000),
        "job_id": job,
        "session_id": "0193a8b2-7c50-7000-8000-00000000a001",
        "seq": g,
        "step_index": g // 5,
    }
    if t == "LLM_REQUEST":
        doc.update(model="claude-sonnet-4-5-20250929", message_count=2 + g // 5)
    elif t == "LLM_RESPONSE":
        doc.update(prompt_tokens=1000 + g % 5000, completion_tokens=100 + g % 900, finish_reason="tool_use",
                   duration_ms=900 + g % 4000)
    elif t == "TOOL_START":
        doc.update(invocation_id="inv_%06d" % (g // 5), tool_name="web_search",
                   input_summary="query number %d about release notes and changelogs" % g)
    elif t == "TOOL_RESULT":
        doc.update(invocation_id="inv_%06d" % (g // 5), tool_name="web_search", success=g % 7 != 0,
                   result_summary="Found %d results for query number %d about release notes" % (g % 13, g))
    else:
        doc.update(checkpoint_id="0193a8b2-8b00-7000-8000-%012d" % g)
    return json.dumps(doc, separators=(",", ":")) + "\n"


def corpus(root, dirs, per_dir, lines, series=0):
    files = dirs * per_dir
    per_file, extra = divmod(lines, files)
    n = 0
    for d in range(dirs):
        job = job_id(d, series)
        os.makedirs(os.path.join(root, job), exist_ok=True)
        for k in range(per_dir):
            count = per_file + (1 if n < extra else 0)
            with open(os.path.join(root, job, "session_20260223T143022Z_pod-%d.jsonl" % k), "w") as f:
                f.write("".join(spike_line(job, g) for g in range(count)))
            n += 1


def idle(root, files):
    for d in range(files):
        job = job_id(d)
        os.makedirs(os.path.join(root, job), exist_ok=True)
        with open(os.path.join(root, job, "session-001.jsonl"), "w") as f:
            f.write(spike_line(job, 0))


def append(root, marker, files, lines, rate):
    handles = []
    for i in range(files):
        job = job_id(900000 + i) if marker == "latency" else job_id(800000 + i)
        os.makedirs(os.path.join(root, job), exist_ok=True)
        handles.append(open(os.path.join(root, job, "session_20260223T143022Z_%s.jsonl" % marker), "a"))
    interval = 1.0 / rate
    start = time.monotonic()
    for n in range(lines):
        due = start + n * interval
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        line = json.dumps({"type": "LAT", "timestamp": "2026-02-23T15:00:00.000Z", "seq": n, "marker": marker,
                           "appended_us": time.time_ns() // 1000}, separators=(",", ":")) + "\n"
        h = handles[n % files]
        h.write(line)
        h.flush()
    for h in handles:
        h.close()


def main(argv):
    what = argv[1]
    if what == "corpus":
        corpus(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6]) if len(argv) > 6 else 0)
    elif what == "idle":
        idle(argv[2], int(argv[3]))
    elif what == "append":
        append(argv[2], argv[3], int(argv[4]), int(argv[5]), float(argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
