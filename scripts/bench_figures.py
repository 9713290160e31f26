"""Reads scripts/bench_compare.sh's logs of one benchmark and prints each key figure (stdin: lines
"label regex|field|direction") for the base and the head, medians over the runs, and the cost.

The cost is read pair by pair: runs 2p-1 and 2p of a benchmark are one pair, one of each build,
run one after the other, so each pair's head/base is measured on the machine as it was then. The
printed cost is the median of the pairs' costs, and with more than one pair, their lowest and
highest: a machine that swings between pairs shows as a wide range rather than as a drift of
the median."""
import glob
import re
import statistics
import sys

bench, logs = sys.argv[1], sys.argv[2]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
RUN = re.compile(r"\.(base|head)\.(\d+)$")


def runs():
    """{run number: (side, path)} of this benchmark's logs."""
    found = {}
    for path in glob.glob(f"{logs}/{bench}.*"):
        m = RUN.search(path)
        if m:
            found[int(m.group(2))] = (m.group(1), path)
    return found


def figure(path, pattern, field):
    for line in open(path, encoding="utf-8", errors="replace"):
        if re.search(pattern, line):
            # Digits grouped by spaces ("1 000 000") are not figures: only the tail after the label counts.
            nums = NUMBER.findall(line)
            return float(nums[field - 1]) if len(nums) >= field else None
    return None


def cost(base, head, direction):
    if direction == "higher":
        return base / head if head else float("inf")
    return head / base if base else float("inf")


all_runs = runs()
specs = [spec.rsplit("|", 2) for spec in sys.stdin.read().splitlines()]
patterns = [p for p, _, _ in specs]
for pattern, field, direction in specs:
    label = re.sub(r"[\\^$]|\+ ?|\[0-9\]|\{[0-9,]*\}", "", pattern)
    label = re.sub(r" +", " ", label)
    if patterns.count(pattern) > 1:
        label += f" (figure {field})"
    label = label[:58]
    got = {n: (side, figure(path, pattern, int(field))) for n, (side, path) in all_runs.items()}
    b = [v for side, v in got.values() if side == "base" and v is not None]
    h = [v for side, v in got.values() if side == "head" and v is not None]
    pair_costs = []
    for p in range(1, len(all_runs) // 2 + 1):
        one = dict(got.get(n, (None, None)) for n in (2 * p - 1, 2 * p))
        if one.get("base") is not None and one.get("head") is not None:
            pair_costs.append(cost(one["base"], one["head"], direction))
    if not b or not h or not pair_costs:
        print(f"{bench:<12} {label:<58} {'missing':>12} {'missing':>12}")
        continue
    spread = f"{min(pair_costs):.2f}-{max(pair_costs):.2f}" if len(pair_costs) > 1 else ""
    print(f"{bench:<12} {label:<58} {statistics.median(b):12.3f} {statistics.median(h):12.3f} "
          f"{statistics.median(pair_costs):8.2f} {spread:>10}")
