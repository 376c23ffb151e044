#!/usr/bin/env python3
"""Checks that every file:line reference of LEARNING.md still points at what it names.

Usage: scripts/check_learning_refs.py [MARKDOWN...]   (default: LEARNING.md; run by ctest as
Docs.LearningReferences). Paths are relative to the repository root.

A reference is `path/to/file.cpp:LINE NAME`: a source path, a colon, a line number, a space and
the name of what is there, written as it appears on that line (`Net::forward`,
`train_net_->backward`, `g[i]`). The check: the file exists, has that line, and the line holds
NAME. A path:line without a name is an error too, since nothing could tell when it went stale.
When code moves, the failure names each stale reference and the lines where NAME is now found,
so fixing the guide is a matter of copying the new number.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SOURCE = r"[\w./-]+\.(?:cpp|h|cu|cuh|py|sh)"
REFERENCE = re.compile(
    r"(?P<path>" + SOURCE + r"):(?P<line>\d+)(?:[ \t]+(?P<name>[\w:~\[\]>.-]*[\w\]]))?"
)


def check(markdown):
    """Returns the problems of one markdown file, one line each, and the number of references."""
    problems = []
    count = 0
    with open(os.path.join(ROOT, markdown), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, text in enumerate(lines, 1):
        for ref in REFERENCE.finditer(text):
            count += 1
            where = "%s:%d: %s:%s" % (markdown, number, ref["path"], ref["line"])
            name = ref["name"]
            if name is None:
                problems.append(where + ": no name after the line number")
                continue
            path = os.path.join(ROOT, ref["path"])
            if not os.path.isfile(path):
                problems.append(where + ": no such file")
                continue
            with open(path, encoding="utf-8") as f:
                source = f.read().split("\n")
            line = int(ref["line"])
            if 1 <= line <= len(source) and name in source[line - 1]:
                continue
            found = [str(i) for i, s in enumerate(source, 1) if name in s]
            problems.append(
                "%s: line %d does not hold '%s' (found on %s)"
                % (where, line, name, ", ".join(found[:5]) if found else "no line")
            )
    return problems, count


def main(argv):
    files = argv[1:] or ["LEARNING.md"]
    failed = False
    for markdown in files:
        problems, count = check(markdown)
        for problem in problems:
            print(problem)
        failed = failed or bool(problems) or count == 0
        print("%s: %d references, %d stale" % (markdown, count, len(problems)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
