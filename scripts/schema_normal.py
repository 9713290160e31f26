"""The install script `cargo pgrx schema` generates, in a form that only changes when the SQL
surface does: pgrx emits its blocks ("connected objects") in an order its dependency graph
does not fix, and tags them with source line numbers that move with every edit. This keeps
each block whole, drops the line-number comments, and sorts the blocks.

Usage: python3 scripts/schema_normal.py RAW > NORMAL
"""
import re
import sys

BEGIN = "/* <begin connected objects> */"
END = "/* </end connected objects> */"
LINE_TAG = re.compile(r"^-- src/\S+:\d+$")

text = open(sys.argv[1], encoding="utf-8").read()
blocks = []
for part in text.split(BEGIN)[1:]:
    body = part.split(END, 1)[0]
    lines = [l for l in body.strip("\n").split("\n") if not LINE_TAG.match(l)]
    blocks.append("\n".join(lines))
header = "-- cortex_buffer's install script as `cargo pgrx schema` generates it, blocks sorted and\n" \
         "-- source line tags dropped (scripts/schema.sh): review changes to the SQL surface here.\n"
sys.stdout.write(header + "\n" + "\n\n".join(f"{BEGIN}\n{b}\n{END}" for b in sorted(blocks)) + "\n")
