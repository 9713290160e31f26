#!/usr/bin/env python3
"""Keeps the user documentation honest (Python 3.11, standard library only).

  python3 scripts/check_docs.py --extract   write pgrx-tests/regress/sql/docs_<page>.sql
  python3 scripts/check_docs.py [--check]   check; print each problem as file:line: message

--extract: for README.md (as `readme`) and each docs/<page>.md (`-` becomes `_` in the test
name), the pg_regress test docs_<page>.sql holds the page's SQL in page order: every ```sql
fenced block, and every hidden setup block (an HTML comment whose first line is
`<!-- regress-setup` and that ends with `-->`) where it stands on the page, so a setup block
placed after the examples works as their clean-up. Each block is preceded by a comment naming
the page and the heading it stands under. Pages without either get no file, and docs_*.sql
files no page produces are removed.

--check (the default) fails when:
  (a) a generated docs_*.sql differs from what --extract would write, or is missing or extra;
      or a ```sql block does not end its last statement with `;` (psql would run it together
      with the next block), or runs something that would change the cluster for later tests
      (ALTER SYSTEM, DROP EXTENSION cortex_buffer, CREATE/DROP DATABASE);
  (b) a Markdown table in README.md, CONTRIBUTING.md, UPDATING.md, CHANGELOG.md or docs/*.md
      has a row whose cell count differs from its header's (`|` inside backticks and `\\|` do
      not separate cells), or a line starting with `|` is not part of a table (after a blank
      line: a table cut by a blank line); or a table row has an unescaped `|` inside a code
      span (GitHub splits cells there all the same: write `\\|`);
  (c) the error table of docs/operations.md (header `| SQLSTATE | condition | raised by | when |
      HINT |`) disagrees with the code: every SQLSTATE `SqlState::code` maps to
      (crates/core/src/error.rs) must have a row; a row's code must be one of those, one the
      extension's SQL raises (`ERRCODE = '…'`, or P0001 for a RAISE EXCEPTION without one, in
      src/**/*.sql and sql/bootstrap.sql), or be marked `(PostgreSQL's own)` in its HINT cell;
      a row's HINT must be `(PostgreSQL's own)` or equal a hint the code gives; and every such
      hint must appear in some row. Hints are read from `with_hint(...)` in src/**/*.rs and
      crates/**/*.rs — a string literal, `format!("…", …)` (each `{…}` placeholder written as
      `…`), or a name bound in the same file to one of those (`const NAME: &str = "…"`,
      `let name = format!("…")`, or the string arms of `let (…, name) = match … { … };`) — and
      from `HINT = '…'` / `HINT = pg_catalog.format('…', …)` (`%I`, `%s`, `%L` written as `…`)
      in the SQL files above. Test code is skipped: files named *_pg_tests.rs, testing.rs,
      tests.rs, and modules under `#[cfg(test)]` or `#[cfg(any(test, …))]`;
  (d) a reference does not resolve. In the code (src/, crates/, sql/bootstrap.sql,
      sql/privileges.sql, scripts/, pgrx-tests/, examples/, clients/) and in README.md,
      CONTRIBUTING.md, UPDATING.md and docs/*.md: `README: Section` (a heading of the README),
      `docs/<page>.md` (the page exists), `docs/<page>.md#anchor`, a Markdown link
      `(<page>.md#anchor)` between pages and `(#anchor)` within one (the anchor is one of the
      page's headings, GitHub's way), and `docs/design.md §Section` (a heading of design.md);
  (e) the roles the docs name disagree with sql/bootstrap.sql: every `cortex_buffer_<name>`
      in README.md and docs/*.md that is not a crate or a Prometheus metric is one of the
      roles it creates, and a count of roles ("four roles") is either how many roles it
      creates or how many are granted to login roles (those it does not forbid members for).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGRESS_SQL = ROOT / "pgrx-tests" / "regress" / "sql"
PREAMBLE = (
    "\\set VERBOSITY default\n"
    "SET timezone = 'UTC';\n"
    "SET datestyle = 'ISO, YMD';\n"
    "SET intervalstyle = 'postgres';\n"
)
OWN = "(PostgreSQL's own)"
ERROR_TABLE_HEADER = ["SQLSTATE", "condition", "raised by", "when", "HINT"]
FORBIDDEN = [
    (re.compile(r"\bALTER\s+SYSTEM\b", re.I), "ALTER SYSTEM"),
    (re.compile(r"\bDROP\s+EXTENSION\b[^;]*\bcortex_buffer\b", re.I), "DROP EXTENSION cortex_buffer"),
    (re.compile(r"\b(CREATE|DROP)\s+DATABASE\b", re.I), "CREATE/DROP DATABASE"),
]

problems: list[str] = []


def problem(path: Path, line: int, message: str) -> None:
    problems.append(f"{path.relative_to(ROOT)}:{line}: {message}")


# --- pages and their SQL ---------------------------------------------------------------------


def sql_pages() -> list[tuple[Path, str]]:
    pages = [(ROOT / "README.md", "readme")]
    for p in sorted((ROOT / "docs").glob("*.md")):
        pages.append((p, p.stem.replace("-", "_")))
    return pages


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def blocks(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, kind, text, section) of every ```sql block and hidden setup block, in page order;
    `section` is the heading the block stands under."""
    out = []
    lines = path.read_text(encoding="utf-8").split("\n")
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"#{1,6} ", line):
            section = line.strip()
        m = FENCE.match(line)
        if m:
            fence, lang = m.group(2), m.group(3).lower()
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
                body.append(lines[j])
                j += 1
            if j == len(lines):
                problem(path, i + 1, "unclosed code fence")
            if lang == "sql":
                indent = len(m.group(1))
                body = [b[indent:] if b[:indent].strip() == "" else b for b in body]
                out.append((i + 1, "sql", "\n".join(body), section))
            i = j + 1
            continue
        if line.strip().startswith("<!-- regress-setup"):
            body = []
            rest = line.strip()[len("<!-- regress-setup") :]
            if "-->" in rest:
                body.append(rest.split("-->", 1)[0])
                j = i
            else:
                if rest.strip():
                    body.append(rest)
                j = i + 1
                while j < len(lines) and "-->" not in lines[j]:
                    body.append(lines[j])
                    j += 1
                if j == len(lines):
                    problem(path, i + 1, "unclosed regress-setup comment")
                else:
                    body.append(lines[j].split("-->", 1)[0])
            out.append((i + 1, "setup", "\n".join(body).strip("\n"), section))
            i = j + 1
            continue
        i += 1
    return out


def strip_sql_noise(text: str) -> str:
    """SQL without comments, quoted strings and dollar-quoted bodies (for the checks below)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "'":
            j = i + 1
            while j < n:
                if text[j] == "'" and text.startswith("''", j):
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    j += 1
            out.append("''")
            i = j + 1
        elif c == "$":
            m = re.match(r"\$([A-Za-z_]\w*)?\$", text[i:])
            if m:
                tag = m.group(0)
                j = text.find(tag, i + len(tag))
                out.append("$$")
                i = n if j < 0 else j + len(tag)
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_sql_block(path: Path, line: int, text: str) -> None:
    code = strip_sql_noise(text)
    for rx, what in FORBIDDEN:
        if rx.search(code):
            problem(path, line, f"a ```sql block runs {what}: show it in a ```sh or ```conf block instead")
    meaningful = [l.strip() for l in code.split("\n") if l.strip()]
    if meaningful and not (meaningful[-1].endswith(";") or re.search(r"(^|\s)\\[a-z]\w*(\s.*)?$", meaningful[-1])):
        problem(path, line, "the block's last statement does not end with ';' (psql would join it to the next block)")


def generated(path: Path, test: str) -> str | None:
    found = blocks(path)
    if not found:
        return None
    rel = path.relative_to(ROOT)
    parts = [f"-- generated by scripts/check_docs.py from {rel}: edit the page, not this file\n", PREAMBLE]
    for line, kind, text, section in found:
        if kind == "sql":
            check_sql_block(path, line, text)
        # Labelled by section, not line, so that editing the prose above a block does not
        # change the test's expected output.
        label = f"-- {rel}" + (f" {section}" if section else "") + (" (hidden setup)" if kind == "setup" else "")
        parts.append(f"{label}\n{text.rstrip()}\n")
    return "".join(parts)


def expected_files() -> dict[Path, str]:
    files = {}
    for page, test in sql_pages():
        text = generated(page, test)
        if text is not None:
            files[REGRESS_SQL / f"docs_{test}.sql"] = text
    return files


def extract() -> None:
    files = expected_files()
    REGRESS_SQL.mkdir(parents=True, exist_ok=True)
    for f, text in files.items():
        if not f.exists() or f.read_text(encoding="utf-8") != text:
            f.write_text(text, encoding="utf-8")
            print(f"wrote {f.relative_to(ROOT)}")
    for f in sorted(REGRESS_SQL.glob("docs_*.sql")):
        if f not in files and f.read_text(encoding="utf-8").startswith("-- generated by scripts/check_docs.py"):
            f.unlink()
            print(f"removed {f.relative_to(ROOT)}")


def check_extracted() -> None:
    files = expected_files()
    for f, text in files.items():
        if not f.exists():
            problem(f, 1, "missing: run python3 scripts/check_docs.py --extract")
        elif f.read_text(encoding="utf-8") != text:
            problem(f, 1, "differs from its page: run python3 scripts/check_docs.py --extract")
    for f in sorted(REGRESS_SQL.glob("docs_*.sql")):
        if f not in files:
            problem(f, 1, "no page produces this file: run python3 scripts/check_docs.py --extract")


# --- Markdown tables -------------------------------------------------------------------------

SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def split_row(line: str) -> tuple[list[str], bool]:
    """The cells of a table row, and whether a code span holds an unescaped `|`."""
    cells, cur = [], []
    pipe_in_code = False
    s = line.strip()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            cur.append(s[i : i + 2])
            i += 2
        elif c == "`":
            run = len(s[i:]) - len(s[i:].lstrip("`"))
            close = s.find("`" * run, i + run)
            # the closing run must be exactly `run` backticks long
            while close >= 0 and (close + run < n and s[close + run] == "`"):
                close = s.find("`" * run, close + run + 1)
            if close < 0:
                cur.append(s[i : i + run])
                i += run
            else:
                span = s[i : close + run]
                if re.search(r"(?<!\\)\|", span):
                    pipe_in_code = True
                cur.append(span)
                i = close + run
        elif c == "|":
            cells.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(c)
            i += 1
    cells.append("".join(cur))
    if s.startswith("|"):
        cells = cells[1:]
    if s.endswith("|") and not s.endswith("\\|") and cells:
        cells = cells[:-1]
    return [c.strip() for c in cells], pipe_in_code


def tables(path: Path) -> list[tuple[int, list[str], list[tuple[int, list[str]]]]]:
    """(line, header cells, [(line, cells)]) of every table; reports malformed ones."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found = []
    in_fence = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        m = FENCE.match(raw)
        if in_fence:
            if raw.strip().startswith(in_fence):
                in_fence = None
            i += 1
            continue
        if m:
            in_fence = m.group(2)[0] * len(m.group(2))
            i += 1
            continue
        if not raw.lstrip().startswith("|"):
            i += 1
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not SEPARATOR.match(nxt.strip()):
            prev = lines[i - 1] if i > 0 else ""
            if not prev.strip():
                problem(path, i + 1, "a table cut by a blank line (or a row without a header and separator row)")
            else:
                problem(path, i + 1, "a line starting with '|' that is not part of a table")
            i += 1
            continue
        header, bad = split_row(raw)
        sep, _ = split_row(nxt)
        if bad:
            problem(path, i + 1, "unescaped '|' inside a code span in a table row: write \\|")
        if len(sep) != len(header):
            problem(path, i + 2, f"separator row has {len(sep)} cells, the header {len(header)}")
        rows = []
        j = i + 2
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            cells, bad = split_row(lines[j])
            if bad:
                problem(path, j + 1, "unescaped '|' inside a code span in a table row: write \\|")
            if len(cells) != len(header):
                problem(path, j + 1, f"row has {len(cells)} cells, the header {len(header)}")
            rows.append((j + 1, cells))
            j += 1
        found.append((i + 1, header, rows))
        i = j
    return found


def lint_tables() -> list[tuple[Path, list]]:
    out = []
    files = [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "UPDATING.md", "CHANGELOG.md")]
    files += sorted((ROOT / "docs").glob("*.md"))
    for f in files:
        if f.exists():
            out.append((f, tables(f)))
    return out


# --- hints in the code -----------------------------------------------------------------------

ELLIPSIS = "…"


def rust_string(src: str, i: int) -> tuple[str, int] | None:
    """The Rust string literal starting at src[i] (plain or raw), and the index after it."""
    m = re.compile(r'r(#*)"').match(src, i)
    if m:
        hashes = m.group(1)
        start = i + len(m.group(0))
        end = src.find('"' + hashes, start)
        return (src[start:end], end + 1 + len(hashes)) if end >= 0 else None
    if i >= len(src) or src[i] != '"':
        return None
    out = []
    j = i + 1
    while j < len(src):
        c = src[j]
        if c == '"':
            return "".join(out), j + 1
        if c == "\\":
            e = src[j + 1 : j + 2]
            if e == "\n":
                j += 2
                while j < len(src) and src[j] in " \t\r\n":
                    j += 1
                continue
            simple = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
            if e in simple:
                out.append(simple[e])
                j += 2
                continue
            if e == "u":
                m2 = re.match(r"\\u\{([0-9a-fA-F_]+)\}", src[j:])
                if m2:
                    out.append(chr(int(m2.group(1).replace("_", ""), 16)))
                    j += len(m2.group(0))
                    continue
            if e == "x":
                out.append(chr(int(src[j + 2 : j + 4], 16)))
                j += 4
                continue
            out.append(e)
            j += 2
            continue
        out.append(c)
        j += 1
    return None


def format_placeholders(text: str) -> str:
    """A format! string with each {…} placeholder as … and {{ }} as braces."""
    out = []
    i = 0
    while i < len(text):
        if text.startswith("{{", i):
            out.append("{")
            i += 2
        elif text.startswith("}}", i):
            out.append("}")
            i += 2
        elif text[i] == "{":
            j = text.find("}", i)
            out.append(ELLIPSIS)
            i = len(text) if j < 0 else j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def skip_ws(src: str, i: int) -> int:
    while i < len(src) and src[i] in " \t\r\n":
        i += 1
    return i


def value_at(src: str, i: int) -> str | None:
    """A hint value at src[i]: a string literal, or format!(literal, ...)."""
    i = skip_ws(src, i)
    lit = rust_string(src, i)
    if lit:
        return lit[0]
    m = re.match(r"format!\s*\(", src[i:])
    if m:
        lit = rust_string(src, skip_ws(src, i + len(m.group(0))))
        if lit:
            return format_placeholders(lit[0])
    return None


RAW_START = re.compile(r'r#*"')
CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")


def matching_brace(src: str, i: int) -> int:
    """Index of the `}` closing the `{` at src[i] (strings, chars and comments skipped)."""
    depth = 0
    j = i
    n = len(src)
    while j < n:
        c = src[j]
        if c == '"' or (c == "r" and RAW_START.match(src, j) and not (j > 0 and (src[j - 1].isalnum() or src[j - 1] == "_"))):
            lit = rust_string(src, j)
            if lit:
                j = lit[1]
                continue
        elif c == "'":
            ch = CHAR_LITERAL.match(src, j)
            if ch:
                j = ch.end()
                continue
        elif src.startswith("//", j):
            k = src.find("\n", j)
            j = n if k < 0 else k
            continue
        elif src.startswith("/*", j):
            k = src.find("*/", j + 2)
            j = n if k < 0 else k + 2
            continue
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return n


def resolve_name(src: str, name: str) -> list[str]:
    """Hints a name passed to with_hint() is bound to in the same file."""
    found = []
    for m in re.finditer(rf"\bconst\s+{name}\s*:\s*&(?:'static\s+)?str\s*=\s*", src):
        v = value_at(src, m.end())
        if v is not None:
            found.append(v)
    for m in re.finditer(rf"\blet\s+{name}\s*(?::[^=]+)?=\s*", src):
        v = value_at(src, m.end())
        if v is not None:
            found.append(v)
    for m in re.finditer(rf"\blet\s*\([^)]*\b{name}\s*\)\s*=\s*match\b[^{{]*", src):
        start = m.end()
        end = matching_brace(src, start)
        body = src[start:end]
        for t in re.finditer(r",\s*(?=r?#*\")", body):
            lit = rust_string(body, skip_ws(body, t.end()))
            if lit and re.match(r"\s*,?\s*\)", body[lit[1] :]):
                found.append(lit[0])
    return found


def line_of(src: str, i: int) -> int:
    return src.count("\n", 0, i) + 1


TEST_MODULE = re.compile(r"^[ \t]*#\[cfg\((?:test\)|any\(test)[^\n]*\n(?:[ \t]*#\[[^\n]*\n)*[ \t]*(?:pub\s+)?mod\s+\w+\s*\{", re.M)


def without_test_modules(src: str) -> str:
    """`src` with every `#[cfg(test)]` (or `#[cfg(any(test, …))]`) module blanked out, lines kept."""
    while True:
        m = TEST_MODULE.search(src)
        if not m:
            return src
        end = matching_brace(src, m.end() - 1)
        blank = re.sub(r"[^\n]", " ", src[m.start() : end + 1])
        src = src[: m.start()] + blank + src[end + 1 :]


def rust_hints() -> list[tuple[str, Path, int]]:
    out = []
    files = sorted((ROOT / "src").rglob("*.rs")) + sorted((ROOT / "crates").rglob("*.rs"))
    for f in files:
        if f.name.endswith("_pg_tests.rs") or f.name in ("testing.rs", "tests.rs"):
            continue
        src = f.read_text(encoding="utf-8")
        src = without_test_modules(src)
        for m in re.finditer(r"\.with_hint\(", src):
            i = skip_ws(src, m.end())
            v = value_at(src, i)
            if v is not None:
                out.append((v, f, line_of(src, m.start())))
                continue
            nm = re.match(r"([A-Za-z_]\w*)\s*\)", src[i:])
            if nm:
                resolved = resolve_name(src, nm.group(1))
                if not resolved:
                    problem(f, line_of(src, m.start()), f"check_docs.py cannot read the hint bound to {nm.group(1)}")
                for v in resolved:
                    out.append((v, f, line_of(src, m.start())))
                continue
            problem(f, line_of(src, m.start()), "check_docs.py cannot read this with_hint() argument")
    return out


def sql_string(src: str, i: int) -> tuple[str, int] | None:
    if i >= len(src) or src[i] != "'":
        return None
    out = []
    j = i + 1
    while j < len(src):
        if src.startswith("''", j):
            out.append("'")
            j += 2
        elif src[j] == "'":
            return "".join(out), j + 1
        else:
            out.append(src[j])
            j += 1
    return None


def sql_sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.sql")) + [ROOT / "sql" / "bootstrap.sql"]


def sql_hints() -> list[tuple[str, Path, int]]:
    out = []
    for f in sql_sources():
        src = f.read_text(encoding="utf-8")
        for m in re.finditer(r"\bHINT\s*=\s*", src):
            i = m.end()
            fm = re.match(r"(?:pg_catalog\.)?format\s*\(\s*", src[i:])
            if fm:
                lit = sql_string(src, i + len(fm.group(0)))
                if lit:
                    text = re.sub(r"%[ILs]", ELLIPSIS, lit[0]).replace("%%", "%")
                    out.append((text, f, line_of(src, m.start())))
                    continue
            lit = sql_string(src, i)
            if lit:
                out.append((lit[0], f, line_of(src, m.start())))
            else:
                problem(f, line_of(src, m.start()), "check_docs.py cannot read this HINT")
    return out


CONDITION_CODES = {"object_not_in_prerequisite_state": "55000", "insufficient_privilege": "42501"}


def sql_codes() -> set[str]:
    codes = set()
    for f in sql_sources():
        src = f.read_text(encoding="utf-8")
        for m in re.finditer(r"RAISE\s+EXCEPTION\b(.*?);", src, re.S):
            stmt = m.group(1)
            code = re.search(r"ERRCODE\s*=\s*'([^']+)'", stmt)
            if not code:
                codes.add("P0001")
            elif re.fullmatch(r"[0-9A-Z]{5}", code.group(1)):
                codes.add(code.group(1))
            elif code.group(1) in CONDITION_CODES:
                codes.add(CONDITION_CODES[code.group(1)])
            else:
                problem(f, line_of(src, m.start()), f"check_docs.py does not know the code of {code.group(1)}")
    return codes


def sqlstate_codes() -> set[str]:
    f = ROOT / "crates" / "core" / "src" / "error.rs"
    src = f.read_text(encoding="utf-8")
    body = re.search(r"fn code\(self\)[^{]*\{(.*?)\n    \}", src, re.S)
    codes = set(re.findall(r'SqlState::\w+\s*=>\s*"([0-9A-Z]{5})"', body.group(1) if body else ""))
    if not codes:
        problem(f, 1, "check_docs.py found no SQLSTATEs in SqlState::code")
    return codes


def unwrap_cell(cell: str) -> str:
    c = cell.strip()
    m = re.fullmatch(r"(`+)\s?(.*?)\s?\1", c)
    if m:
        c = m.group(2)
    return c.replace("\\|", "|")


def check_error_table(all_tables: list[tuple[Path, list]]) -> None:
    page = ROOT / "docs" / "operations.md"
    candidates = [
        (line, rows)
        for f, ts in all_tables
        if f == page
        for line, header, rows in ts
        if header == ERROR_TABLE_HEADER
    ]
    if len(candidates) != 1:
        problem(page, 1, f"expected one error table with header | {' | '.join(ERROR_TABLE_HEADER)} |, found {len(candidates)}")
        return
    _, rows = candidates[0]
    core_codes = sqlstate_codes()
    known_codes = core_codes | sql_codes()
    hints = rust_hints() + sql_hints()
    hint_texts = {h for h, _, _ in hints}
    seen_codes, seen_hints = set(), set()
    for line, cells in rows:
        if len(cells) != len(ERROR_TABLE_HEADER):
            continue  # reported by the table lint
        code = unwrap_cell(cells[0])
        hint = unwrap_cell(cells[4])
        seen_codes.add(code)
        own = hint == OWN
        if not own and code not in known_codes:
            problem(page, line, f"{code} is not a SQLSTATE cortex_buffer raises: mark the row {OWN} or fix the code")
        if not own:
            if hint in hint_texts:
                seen_hints.add(hint)
            else:
                problem(page, line, f"HINT is not one the code gives (copy it from the with_hint/HINT literal): {hint}")
    for code in sorted(core_codes - seen_codes):
        problem(page, 1, f"SQLSTATE {code} (SqlState::code) has no row in the error table")
    reported = set()
    for h, f, line in hints:
        if h not in seen_hints and h not in reported:
            reported.add(h)
            problem(f, line, f"this hint has no row in docs/operations.md's error table: {h}")


# --- references and roles --------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(page: Path) -> list[str]:
    out, fence = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(m.group(1))
    return out


def reference_sources() -> list[Path]:
    files: list[Path] = []
    for base, globs in (
        ("src", ("**/*.rs", "**/*.sql")),
        ("crates", ("**/*.rs",)),
        ("scripts", ("*.sh", "*.py")),
        ("pgrx-tests", ("tests/*.rs", "src/**/*.rs", "isolation/specs/*.spec", "oracle/*.mjs")),
        ("examples", ("**/*.js", "**/*.mjs", "**/*.ts", "**/*.yml", "**/*.yaml")),
        ("clients", ("**/*.ts", "**/*.js", "**/*.mjs", "**/*.md")),
    ):
        for g in globs:
            files += [f for f in (ROOT / base).glob(g) if "node_modules" not in f.parts and "dist" not in f.parts]
    files += [ROOT / "sql" / "bootstrap.sql", ROOT / "sql" / "privileges.sql"]
    files += [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "UPDATING.md")]
    files += sorted((ROOT / "docs").glob("*.md"))
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


README_REF = re.compile(r"README(?::|'s|,) \*?([A-Z][\w' -]*[\w])")
PAGE_REF = re.compile(r"docs/([\w-]+)\.md(#[\w-]+| §\s?[A-Z][\w' -]*[\w])?")
LINK_REF = re.compile(r"\]\((?:\.\./)?(?:docs/)?([\w-]+\.md)?(#[\w-]+)\)")


def check_references() -> None:
    cache: dict[Path, list[str]] = {}

    def heads(page: Path) -> list[str]:
        if page not in cache:
            cache[page] = headings(page) if page.exists() else []
        return cache[page]

    readme = ROOT / "README.md"
    for f in reference_sources():
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in README_REF.finditer(line):
                want = m.group(1).strip()
                if not any(h.lower() == want.lower() for h in heads(readme)):
                    problem(f, n, f"'README: {want}' names no heading of the README")
            for m in PAGE_REF.finditer(line):
                page = ROOT / "docs" / f"{m.group(1)}.md"
                if not page.exists():
                    problem(f, n, f"docs/{m.group(1)}.md does not exist")
                    continue
                ref = m.group(2) or ""
                if ref.startswith("#") and ref[1:] not in {slug(h) for h in heads(page)}:
                    problem(f, n, f"docs/{m.group(1)}.md{ref}: no such heading")
                elif ref.lstrip().startswith("§"):
                    want = ref.strip().lstrip("§").strip()
                    # A reference may break across lines: its first words must begin a heading.
                    w = want.lower()
                    if not any(w.startswith(h.lower()) or h.lower().startswith(w) for h in heads(page)):
                        problem(f, n, f"docs/{m.group(1)}.md §{want}: no such heading")
            if f.suffix != ".md":
                continue
            for m in LINK_REF.finditer(line):
                target = m.group(1)
                if target is None:
                    page = f
                elif f.parent == ROOT and "docs/" not in m.group(0) and target != "README.md":
                    page = ROOT / target
                elif target == "README.md":
                    page = readme
                else:
                    page = ROOT / "docs" / target if (f.parent != ROOT or "docs/" in m.group(0)) else ROOT / target
                if not page.exists():
                    problem(f, n, f"link to {target}: no such page")
                elif m.group(2)[1:] not in {slug(h) for h in heads(page)}:
                    problem(f, n, f"link to {target or f.name}{m.group(2)}: no such heading")


NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
# Crates, and the trigger `bind_job_table` puts on the control plane's table.
NOT_ROLES = re.compile(r"cortex_buffer_(core|watch|ship|e2e|checkpoint_marked)\b")


def check_roles() -> None:
    boot = (ROOT / "sql" / "bootstrap.sql").read_text(encoding="utf-8")
    m = re.search(r"FOREACH role_name IN ARRAY ARRAY\[(.*?)\]", boot, re.S)
    if not m:
        problem(ROOT / "sql" / "bootstrap.sql", 1, "no role list (FOREACH role_name IN ARRAY ARRAY[...]) found")
        return
    roles = set(re.findall(r"'(cortex_buffer_\w+)'", m.group(1)))
    internal = set(re.findall(r"role (cortex_buffer_\w+) has members", boot))
    # Prometheus metric names: the exporter's query names (top-level keys of queries.yaml) joined
    # with their column names; never a role's name.
    queries = (ROOT / "examples" / "monitoring" / "queries.yaml").read_text(encoding="utf-8")
    metrics = {m for m in re.findall(r"^(cortex_buffer_\w+):", queries, re.M) if m not in roles}
    counts = {len(roles), len(roles - internal)}
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for name in re.findall(r"\bcortex_buffer_\w+", line):
                if name in roles or NOT_ROLES.match(name) or any(name.startswith(x + "_") or name == x for x in metrics):
                    continue
                problem(f, n, f"{name} is not a role sql/bootstrap.sql creates")
            for word in re.findall(r"\b(\w+) roles\b", line, re.I):
                k = NUMBERS.get(word.lower(), int(word) if word.isdigit() else None)
                if k is not None and k not in counts:
                    problem(
                        f,
                        n,
                        f"'{word} roles': sql/bootstrap.sql creates {len(roles)}, "
                        f"{len(roles - internal)} of them granted to login roles",
                    )


def main(argv: list[str]) -> int:
    args = set(argv[1:])
    unknown = args - {"--extract", "--check"}
    if unknown or len(args) > 1:
        print(__doc__, file=sys.stderr)
        return 2
    if "--extract" in args:
        extract()
        for p in problems:
            print(p)
        return 1 if problems else 0
    check_extracted()
    all_tables = lint_tables()
    check_error_table(all_tables)
    check_references()
    check_roles()
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    n_tables = sum(len(ts) for _, ts in all_tables)
    print(f"check_docs: ok ({len(expected_files())} generated tests, {n_tables} tables)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
