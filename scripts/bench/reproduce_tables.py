#!/usr/bin/env python3
"""Re-measures the measured tables of the kernel READMEs and says which rows still hold.

A table a command produces carries an HTML comment on the line right above it:

    <!-- reproduce: {ladder} --path simt; key: rung; value: TFLOP/s -->
    | rung | TFLOP/s | % of cuBLAS | ... |

`reproduce:` the command ({ladder}, {crema} and {python} stand for --ladder, --crema and
--python); `key:` the column(s), comma-separated, that name a row, in the README table and in
the command's output alike; `value:` the column compared. The script runs each command once,
finds the output's table by its header line (the one line holding every key and value column
name), and prints, per README row: key, documented, measured, deviation, and PASS when within
--tolerance (5%) of the documented number, FAIL otherwise (also when the row is missing from the
output or its documented cell is not a number). Exit status 0 when every row passed.

Parsing (scripts/bench/README.md says more):
- README cells: backticks dropped, thousands commas and a trailing % ignored; a key cell matches
  an output key equal to it or to its first word ("s1 `uncoalesced`" is the row "s1"). A cell
  "151.8 / 166.7" holds one number per row of a key cell "tf32 / bf16" beside it (the table
  lists two maths in one row); the row expands into one comparison each.
- Output: fixed-width text tables (crema_gemm_ladder, `crema bench`). The header's words are
  located by column; each word of a data line belongs to the header word it overlaps, or else to
  the nearest header word on its left (a left-aligned field such as "relu fwd" or an idea in
  words). A "%" alone in the header joins the word after it ("% best"). Lines after the header
  up to the first blank line are its rows.

    scripts/bench/reproduce_tables.py [README...] [--ladder PATH] [--crema PATH] [--list]
                                      [--fill-tbd] [--timeout SECONDS]

--fill-tbd writes the run's numbers into the rows documented as TBD (each TBD cell of such a row
whose column the output also has): a new table's first measurement; run again to reproduce it.

Without README arguments: every kernels/*/README.md (and kernels/*/ladder/README.md).
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import time

COMMENT = re.compile(r"<!--\s*reproduce:\s*(?P<cmd>.*?);\s*key:\s*(?P<key>.*?);"
                     r"\s*value:\s*(?P<value>.*?)\s*-->")
TIME_UNITS = ("ms", "us", "s", "time")


def norm(text):
    return " ".join(text.replace("`", "").split())


def number(text):
    """The number in a README or output cell, or None ("TBD", "-", words)."""
    t = norm(text).replace(",", "").rstrip("%").strip()
    try:
        return float(t)
    except ValueError:
        return None


def markdown_rows(lines, start):
    """Header cells and data rows of the markdown table starting at lines[start]."""
    def cells(line):
        return [c.strip() for c in line.strip().strip("|").split("|")]
    header = cells(lines[start])
    rows = []
    for line in lines[start + 2:]:
        if not line.strip().startswith("|"):
            break
        rows.append(cells(line))
    return header, rows


def find_tables(path):
    """(command, keys, value, header, rows, line number) of each commented table of a file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = COMMENT.search(line)
        if not m:
            continue
        if i + 2 >= len(lines) or not lines[i + 1].strip().startswith("|"):
            raise ValueError(f"{path}:{i + 1}: a reproduce comment must sit right above a table")
        keys = [k.strip() for k in m.group("key").split(",")]
        header, rows = markdown_rows(lines, i + 1)
        for name in keys + [m.group("value")]:
            if name not in header:
                raise ValueError(f"{path}:{i + 1}: column '{name}' is not in the table's header "
                                 f"{header}")
        out.append((m.group("cmd"), keys, m.group("value"), header, rows, i + 1))
    return out


def expand(header, row, keys, value):
    """One (key tuple, documented text) per comparison a README row holds ("a / b" cells)."""
    cell = dict(zip(header, row))
    parts = {name: [p.strip() for p in cell.get(name, "").split(" / ")] for name in keys + [value]}
    count = max(len(p) for p in parts.values())
    out = []
    for j in range(count):
        pick = {name: p[j] if len(p) == count else p[0] for name, p in parts.items()}
        out.append((tuple(norm(pick[k]) for k in keys), pick[value]))
    return out


def header_words(line):
    """(name, start, end) of each header word; a lone "%" joins the word after it."""
    words = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", line)]
    out = []
    i = 0
    while i < len(words):
        name, start, end = words[i]
        if name == "%" and i + 1 < len(words):
            name, end = "% " + words[i + 1][0], words[i + 1][2]
            i += 1
        out.append((name, start, end))
        i += 1
    return out


def split_fixed(line, columns):
    """A data line's fields by the header's columns (see the module's docstring)."""
    fields = {name: [] for name, _, _ in columns}
    for m in re.finditer(r"\S+", line):
        s, e = m.start(), m.end()
        best, overlap = None, 0
        for name, cs, ce in columns:
            o = min(e, ce) - max(s, cs)
            if o > overlap:
                best, overlap = name, o
        if best is None:
            left = [c for c in columns if c[1] <= s]
            best = (left[-1] if left else columns[0])[0]
        fields[best].append(m.group())
    return {name: " ".join(words) for name, words in fields.items()}


def parse_output_fields(text, keys, value):
    """{key tuple: {column: text}} of the first output table whose header names every column."""
    lines = text.splitlines()
    wanted = keys + [value]
    for i, line in enumerate(lines):
        columns = header_words(line)
        names = [c[0] for c in columns]
        if not all(w in names for w in wanted):
            continue
        rows = {}
        for data in lines[i + 1:]:
            if not data.strip():
                break
            f = split_fixed(data, columns)
            rows.setdefault(tuple(norm(f[k]) for k in keys), f)
        return rows
    return None


def parse_output(text, keys, value):
    """{key tuple: value text} of the first output table whose header names every column."""
    fields = parse_output_fields(text, keys, value)
    return None if fields is None else {k: f[value] for k, f in fields.items()}


def fill_tbd(path, line, header, keys, value, measured_fields):
    """Writes measured cells into the README table at `line` (its comment's line, 1-based):
    in each row whose value cell is TBD, every TBD cell whose column the output also has.
    Returns how many rows it filled."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    filled = 0
    i = line + 1  # the header is lines[line]; lines[line + 1] the rule
    while i + 1 < len(lines) and lines[i + 1].strip().startswith("|"):
        i += 1
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        cell = dict(zip(header, cells))
        if norm(cell.get(value, "")) != "TBD":
            continue
        key = tuple(norm(cell.get(k, "")) for k in keys)
        got = match(measured_fields, key) if measured_fields else None
        if got is None:
            continue
        for j, name in enumerate(header):
            if j < len(cells) and norm(cells[j]) == "TBD" and got.get(name):
                cells[j] = got[name]
        lines[i] = "| " + " | ".join(cells) + " |"
        filled += 1
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return filled


def match(measured, key):
    """The output row a README key names: the same text, or its first word, per key column."""
    if key in measured:
        return measured[key]
    for got, val in measured.items():
        if all(g == k or k.split(" ")[0] == g for g, k in zip(got, key)):
            return val
    return None


def compare(documented, measured, value, tolerance):
    """(deviation text, PASS/FAIL and why)."""
    d = number(documented)
    if d is None:
        return "-", f"FAIL (documented '{documented}' is not a number)"
    if measured is None:
        return "-", "FAIL (row missing from the output)"
    m = number(measured)
    if m is None:
        return "-", f"FAIL (measured '{measured}' is not a number)"
    if d == 0:
        return "-", "PASS" if m == 0 else "FAIL (documented 0)"
    dev = (m - d) / d
    lower_is_better = value.lower() in TIME_UNITS
    better = dev < 0 if lower_is_better else dev > 0
    verdict = "PASS" if abs(dev) <= tolerance else "FAIL (" + ("better" if better else "worse") + ")"
    return f"{100 * dev:+.1f}%", verdict


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("readmes", nargs="*")
    ap.add_argument("--ladder", default="build/bin/crema_gemm_ladder")
    ap.add_argument("--crema", default="build/bin/crema")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--list", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds a command may run (its rows fail when it is stopped)")
    ap.add_argument("--fill-tbd", action="store_true",
                    help="write this run's numbers into the rows documented as TBD")
    args = ap.parse_args(argv)
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    readmes = args.readmes or sorted(glob.glob(os.path.join(root, "kernels", "*", "README.md")) +
                                     glob.glob(os.path.join(root, "kernels", "*", "*",
                                                            "README.md")))
    binaries = {"ladder": args.ladder, "crema": args.crema, "python": args.python}
    failed = 0
    for path in readmes:
        for cmd, keys, value, header, rows, line in find_tables(path):
            argv_cmd = [w.format(**binaries) for w in shlex.split(cmd)]
            print(f"\n{os.path.relpath(path, root)}:{line}: {' '.join(argv_cmd)}"
                  f" (key {', '.join(keys)}; value {value})")
            if args.list:
                continue
            start = time.monotonic()
            try:
                run = subprocess.run(argv_cmd, capture_output=True, text=True,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"  FAIL: stopped after {args.timeout:g} s (--timeout)")
                failed += len(rows) or 1
                continue
            print(f"  ({time.monotonic() - start:.1f} s)")
            fields = parse_output_fields(run.stdout, keys, value)
            measured = None if fields is None else {k: f[value] for k, f in fields.items()}
            if measured is None:
                print(f"  FAIL: no table with columns {keys + [value]} in the output "
                      f"(exit status {run.returncode}; stderr: {run.stderr.strip()[-300:]})")
                failed += len(rows) or 1
                continue
            # Keys printed whole (rows that differ only past a fixed width stay apart).
            compared = [(key, documented) for row in rows
                        for key, documented in expand(header, row, keys, value)]
            width = max([28] + [len(" / ".join(key)) for key, _ in compared])
            print(f"  {'key':<{width}} {'documented':>12} {'measured':>12} {'deviation':>10}"
                  f"  verdict")
            for key, documented in compared:
                got = match(measured, key)
                dev, verdict = compare(documented, got, value, args.tolerance)
                failed += not verdict.startswith("PASS")
                print(f"  {' / '.join(key):<{width}} {norm(documented):>12} "
                      f"{got if got is not None else '-':>12} {dev:>10}  {verdict}")
            if args.fill_tbd and any(norm(d) == "TBD" for _, d in compared):
                n = fill_tbd(path, line, header, keys, value, fields)
                print(f"  --fill-tbd: {n} row(s) written into {os.path.relpath(path, root)}")
    if not args.list:
        print(f"\n{'all rows reproduced' if failed == 0 else f'{failed} row(s) failed'}"
              f" (tolerance {100 * args.tolerance:.0f}%)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
