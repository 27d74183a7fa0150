#!/usr/bin/env python3
"""The tree carries its own contract: no file refers outside the repository
(a sibling folder of the checkout, a design document that is not here), every relative Markdown link
points at a file of the tree, and no code comment cites an issue number
(comments cite rules of doc/design.md, which a reader of the tree has)."""
import fnmatch
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = re.compile(r"(^|/)(node_modules|dist)/|package-lock\.json$|\.lock$")
CODE = re.compile(r"(\.(c|h|py|ts|mjs|sh|bash)|meson\.build|/run|install-deps)$")
# Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile(r"\.\./" + "shared|" + "shared/" + r"DESIGN|DESIGN\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+\b|\(#\d+\)")


def ignore_rules(top, rel):
    """The patterns of DIR/.gitignore as (anchored, dir_only, glob): the tree
    is walked without git (a release tarball has no .git), honouring the same
    .gitignore files so that a checkout and its archive read the same files."""
    try:
        with open(os.path.join(top, rel, ".gitignore"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    rules = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            sys.exit(f"{rel}/.gitignore: negated patterns are not supported")
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        rules.append((anchored, dir_only, os.path.join(rel, line.lstrip("/"))
                      if anchored else line))
    return rules


def ignored(rules, path, is_dir):
    name = os.path.basename(path)
    for anchored, dir_only, glob in rules:
        if dir_only and not is_dir:
            continue
        if fnmatch.fnmatchcase(path if anchored else name, glob):
            return True
    return False


def tracked():
    """The text of every file of the tree (tree_files) the checks read."""
    for path in tree_files():
        yield from read_file(path)


def tree_files():
    """Every file of the tree as a clean checkout holds it, found by
    walking the directories: the repository's own folder, build
    directories (a meson build directory, wherever it is, holds
    meson-private/) and what the ignore files name (ignore_rules) are
    left out."""
    stack = [("", [])]
    while stack:
        rel, rules = stack.pop()
        rules = rules + ignore_rules(TOP, rel)
        entries = sorted(os.scandir(os.path.join(TOP, rel)),
                         key=lambda e: e.name, reverse=True)
        for e in entries:
            path = os.path.join(rel, e.name)
            if e.name == ".git":  # a directory, or a worktree's file
                continue
            if e.is_dir(follow_symlinks=False):
                if (ignored(rules, path, True)
                        or os.path.isdir(os.path.join(e.path, "meson-private"))):
                    continue
                stack.append((path, rules))
            elif not ignored(rules, path, False):
                yield path


def read_file(path):
    if SKIP.search(path) or path == "tests/test_tree.py":
        return
    try:
        with open(os.path.join(TOP, path), encoding="utf-8") as f:
            yield path, f.read().splitlines()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return


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
    # --list: the tree's files, NUL-ended, for a copy of the tree as a
    # release has it (tests/chroot-run).
    if sys.argv[1:] == ["--list"]:
        for path in tree_files():
            sys.stdout.write(path + "\0")
        sys.exit(0)
    sys.exit(main())
