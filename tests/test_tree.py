#!/usr/bin/env python3
"""The tree carries its own contract: no file refers outside the repository
(a sibling folder of the checkout, a design document that is not here), every relative Markdown link
points at a file of the tree, and no code comment cites an issue number
(comments cite rules of doc/design.md, which a reader of the tree has)."""
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = re.compile(r"(^|/)(node_modules|dist)/|package-lock\.json$|\.lock$")
CODE = re.compile(r"(\.(c|h|py|ts|mjs|sh|bash)|meson\.build|/run|install-deps)$")
# Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile(r"\.\./" + "shared|" + "shared/" + r"DESIGN|DESIGN\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+\b|\(#\d+\)")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=TOP, check=True,
                         capture_output=True, text=True).stdout
    for path in out.splitlines():
        if SKIP.search(path) or path == "tests/test_tree.py":
            continue
        try:
            with open(os.path.join(TOP, path), encoding="utf-8") as f:
                yield path, f.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue


def check_outside(files):
    return [f"{p}:{i}: refers outside the tree: {line.strip()}"
            for p, lines in files for i, line in enumerate(lines, 1)
            if OUTSIDE.search(line)]


def check_links(files):
    bad = []
    for p, lines in files:
        if not p.endswith(".md"):
            continue
        for i, line in enumerate(lines, 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                path = os.path.normpath(os.path.join(
                    TOP, os.path.dirname(p), target.split("#")[0]))
                if not path.startswith(TOP) or not os.path.exists(path):
                    bad.append(f"{p}:{i}: broken link {target}")
    return bad


def check_issues(files):
    return [f"{p}:{i}: cites an issue: {line.strip()}"
            for p, lines in files if CODE.search(p)
            for i, line in enumerate(lines, 1) if ISSUE.search(line)]


def main():
    files = list(tracked())
    passed = failed = 0
    for name, check in [("nothing refers outside the tree", check_outside),
                        ("every Markdown link resolves", check_links),
                        ("no comment cites an issue number", check_issues)]:
        bad = check(files)
        if bad:
            failed += 1
            print(f"FAIL {name}:")
            for b in bad:
                print("  " + b)
        else:
            passed += 1
            print(f"ok   {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
