#!/usr/bin/env python3
"""The daemon's layers have no circle (doc/design.md, and STYLE's "objects
with callbacks, not knowledge of their users"): a module that calls up to
its users does so through hooks they register, never by name.

Two graphs are built from the files of daemon/ (read, not asked of git: a
release tarball has no .git), and each must have no cycle:

- calls between modules: a module is x.c with its x.h; an arrow runs from
  a module to each other module whose non-static function it calls;
- #includes between layers: each folder under daemon/ is one layer, each
  module at the top of daemon/ (main, util, log, ...) one of its own;
- and #includes between files.
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAEMON = os.path.join(TOP, "daemon")

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
# The style puts a definition's name at the start of its own line.
DEFINITION = re.compile(r"^([A-Za-z_]\w*)\(", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok: {what}")
    else:
        failed += 1
        print(f"FAIL: {what}")


def sources():
    """daemon/'s .c and .h files, relative to daemon/, sorted."""
    out = []
    for d, dirs, files in os.walk(DAEMON):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), DAEMON))
    return out


def read(rel):
    """The file without its comments."""
    with open(os.path.join(DAEMON, rel), encoding="utf-8") as f:
        return COMMENT.sub(" ", f.read())


def module(rel):
    return os.path.splitext(rel)[0]


def layer(rel):
    """A folder under daemon/, or a module at its top."""
    head = rel.split(os.sep)[0]
    return head if os.sep in rel else module(rel)


def cycles(edges):
    """The strongly connected components of more than one node (Tarjan's,
    iterative: no recursion limit to meet)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    counter = 0
    nodes = sorted(set(edges) | {w for vs in edges.values() for w in vs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def report(comps, edges, why):
    for comp in comps:
        print("  circle: " + ", ".join(comp))
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    print(f"    {a} -> {b}: {', '.join(sorted(why[a, b]))}")


def call_graph(files, texts):
    """Module -> modules whose exported functions its .c files call, and
    the names (a header's prototypes are no calls)."""
    files = [rel for rel in files if rel.endswith(".c")]
    texts = {rel: LITERAL.sub('""', texts[rel]) for rel in files}
    owners = {}
    for rel in files:
        text = texts[rel]
        for m in DEFINITION.finditer(text):
            name = m.group(1)
            line = text.rfind("\n", 0, m.start() - 1)
            if "static" in text[line + 1:m.start()] or name.isupper() or \
                    name.startswith("__"):
                continue
            owners.setdefault(name, set()).add(module(rel))
    # A name two programs both define (main) says nothing of either.
    owner = {n: next(iter(o)) for n, o in owners.items() if len(o) == 1}
    edges, why = {}, {}
    for rel in files:
        a = module(rel)
        for m in CALL.finditer(texts[rel]):
            b = owner.get(m.group(1))
            if b is not None and b != a:
                edges.setdefault(a, set()).add(b)
                why.setdefault((a, b), set()).add(m.group(1))
    return edges, why, owner


def include_graph(files, texts, node):
    """node(file) -> node(header) for each #include, and the files."""
    edges, why = {}, {}
    for rel in files:
        for name in INCLUDE.findall(texts[rel]):
            for cand in (os.path.join(os.path.dirname(rel), name), name):
                if os.path.isfile(os.path.join(DAEMON, cand)):
                    a, b = node(rel), node(os.path.normpath(cand))
                    if a != b:
                        edges.setdefault(a, set()).add(b)
                        why.setdefault((a, b), set()).add(
                            f"{rel} includes {name}")
                    break
    return edges, why


def main():
    # The finder finds a circle it is shown, and none where there is none.
    check(cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) ==
          [["a", "b", "c"]] and cycles({"a": {"b"}, "b": {"c"}}) == [],
          "the circle finder sees a circle, and only a circle")

    files = sources()
    texts = {rel: read(rel) for rel in files}
    check(len(files) > 50 and "session/job.c" in texts,
          f"daemon/ read from the files ({len(files)} of them)")

    edges, why, owner = call_graph(files, texts)
    # The graph is real: the arrows the layers are made of are in it.
    check("job_new" in owner and "session/job" in edges.get("session/session",
          ()), "the call graph holds session.c calling job.c")
    comps = cycles(edges)
    report(comps, edges, why)
    check(not comps, "no circle of calls between the modules of daemon/")

    edges, why = include_graph(files, texts, layer)
    check("supervisor" in edges.get("session", ()),
          "the include graph holds session/ including supervisor/")
    comps = cycles(edges)
    report(comps, edges, why)
    check(not comps, "no circle of #includes between the layers of daemon/")

    edges, why = include_graph(files, texts, lambda rel: rel)
    check("session/job.h" in edges.get("session/session.c", ()),
          "the include graph holds session.c including job.h")
    comps = cycles(edges)
    report(comps, edges, why)
    check(not comps, "no circle of #includes between the files of daemon/")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
