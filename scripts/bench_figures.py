"""Reads scripts/bench_compare.sh's logs of one benchmark and prints each key figure (stdin: lines
"label regex|field|direction") for the base and the head, medians over the runs, and the cost."""
import glob
import re
import statistics
import sys

bench, logs = sys.argv[1], sys.argv[2]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def values(side, pattern, field):
    found = []
    for path in sorted(glob.glob(f"{logs}/{bench}.{side}.[0-9]*")):
        if path.endswith(".err"):
            continue
        for line in open(path, encoding="utf-8", errors="replace"):
            if re.search(pattern, line):
                # Digits grouped by spaces ("1 000 000") are not figures: only the tail after the label counts.
                nums = NUMBER.findall(line)
                if len(nums) >= field:
                    found.append(float(nums[field - 1]))
                break
    return found


specs = [spec.rsplit("|", 2) for spec in sys.stdin.read().splitlines()]
patterns = [p for p, _, _ in specs]
for pattern, field, direction in specs:
    b, h = values("base", pattern, int(field)), values("head", pattern, int(field))
    label = re.sub(r"[\\^$]|\+ ?|\[0-9\]", "", pattern)
    if patterns.count(pattern) > 1:
        label += f" (figure {field})"
    label = label[:58]
    if not b or not h:
        print(f"{bench:<12} {label:<58} {'missing':>12} {'missing':>12}")
        continue
    mb, mh = statistics.median(b), statistics.median(h)
    if direction == "higher":
        cost = mb / mh if mh else float("inf")
    else:
        cost = mh / mb if mb else float("inf")
    print(f"{bench:<12} {label:<58} {mb:12.3f} {mh:12.3f} {cost:8.2f}")
