#!/usr/bin/env python3
"""
examples/client_tools.py against a real stexecd on a private socket: the
recorded message mixes Task and TodoWrite (run by the example, runner
client) with bash and read_file (one on a PNG). Checks, from the raw
stream and the session directory, independently of the example: the
printed user message pairs every tool_use id once, in stream order; the
client tools' results are the handlers'; the PNG's read is an image block
whose data is the file; every block was handed over before message_stop;
the subagent ran while the message still streamed. Then the same with
--interrupt: the subagent's handler is cancelled with reason
"interrupt", its result and those of the tools not yet started are
"interrupted", every id is still paired. No tool process is left.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_example_client_tools.py [COMMAND...]

COMMAND runs the example (default: this python3 on
examples/client_tools.py; e.g. node examples/dist/client_tools.js, its
TypeScript twin); the options and the stream follow.

Exit 0 when every check passed, 1 otherwise, 77 (skipped) when
STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
EXAMPLE = os.path.join(TOP, "examples", "client_tools.py")
STREAM = os.path.join(TOP, "examples", "client_tools", "message.sse")

import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

T = Checks()


def stream_tools(path):
    """[(id, name, input)] of the tool_use blocks, from the raw file."""
    out, parts = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("data:"):
                continue
            data = json.loads(line[5:])
            if data["type"] == "content_block_start" and \
                    data["content_block"]["type"] == "tool_use":
                b = data["content_block"]
                parts[data["index"]] = (b["id"], b["name"], [])
            elif data["type"] == "content_block_delta" and \
                    data["delta"]["type"] == "input_json_delta":
                parts[data["index"]][2].append(data["delta"]["partial_json"])
            elif data["type"] == "content_block_stop" and \
                    data["index"] in parts:
                i, name, js = parts.pop(data["index"])
                out.append((i, name, json.loads("".join(js) or "{}")))
    return out


def timeline(err):
    at = []
    for line in err.splitlines():
        m = re.match(r"\[\s*(\d+) ms\] (.*)", line)
        if m:
            at.append((int(m.group(1)), m.group(2)))
    return at


COMMAND = sys.argv[1:] or [sys.executable, EXAMPLE]


def run(d, interrupt):
    cwd = tempfile.mkdtemp(prefix="client-tools-", dir=d.tmp)
    args = COMMAND + ["--socket", d.sock, "--cwd", cwd, STREAM] + (
        ["--interrupt"] if interrupt else [])
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=pydaemon.scaled(120))
    err = p.stderr.decode("utf-8", "replace")
    label = "--interrupt" if interrupt else "plain"
    if not T.eq(p.returncode, 0, "%s: exit status" % label):
        print(err, file=sys.stderr)
        return None
    lines = p.stdout.decode("utf-8").splitlines()
    T.eq(len(lines), 1, "%s: one line on stdout" % label)
    msg = json.loads(lines[0])
    T.eq(msg.get("role"), "user", "%s: a user message" % label)
    tools = stream_tools(STREAM)
    content = msg.get("content", [])
    T.eq([b.get("tool_use_id") for b in content], [t[0] for t in tools],
         "%s: every tool_use id once, in stream order" % label)
    T.check(all(b.get("type") == "tool_result" for b in content),
            "%s: tool_result blocks" % label)
    at = timeline(err)
    stop = [t for t, w in at if w == "message_stop"]
    adds = [t for t, w in at if w.startswith("tool_use ")]
    T.check(len(stop) == 1 and len(adds) == len(tools) and
            all(t <= stop[0] for t in adds),
            "%s: every tool_use handed over before message_stop" % label)
    started = [t for t, w in at if "Task started here" in w]
    T.check(len(started) == 1 and started[0] < stop[0],
            "%s: the subagent started while the message streamed" % label)
    with open(os.path.join(cwd, "plot.png"), "rb") as f:
        png = f.read()
    return {"tools": tools, "content": content, "err": err, "at": at,
            "png": png, "cwd": cwd}


def plain(d):
    r = run(d, False)
    if r is None:
        return
    by = {b["tool_use_id"]: b for b in r["content"]}
    kinds = {}
    for i, name, inp in r["tools"]:
        kinds.setdefault((name, inp.get("file_path")), i)
    T.check(all(not b["is_error"] for b in r["content"]),
            "plain: no error result: %r" % [
                (b["tool_use_id"], b["is_error"]) for b in r["content"]])
    todo = [i for i, name, _ in r["tools"] if name == "TodoWrite"]
    T.check(len(todo) == 2 and all(by[i]["content"].startswith(
        "Todos have been modified successfully") for i in todo),
        "plain: TodoWrite's results are the handler's")
    task = kinds.get(("Task", None))
    T.check(task is not None and isinstance(by[task]["content"], list) and
            by[task]["content"][0]["text"].startswith(
                "Summary of notes.txt (3 lines): stexec runs"),
            "plain: the subagent's result: %r" % (by.get(task),))
    img = by.get(kinds.get(("read_file", "plot.png")), {}).get("content")
    T.check(isinstance(img, list) and any(
        b.get("type") == "image" and
        b["source"]["media_type"] == "image/png" and
        base64.b64decode(b["source"]["data"]) == r["png"] for b in img),
        "plain: read_file of plot.png is an image block of the file")
    notes = by.get(kinds.get(("read_file", "notes.txt")), {}).get("content")
    T.check(isinstance(notes, str) and "one executor" in notes,
            "plain: read_file of notes.txt: %r" % (notes,))
    sh = by.get(kinds.get(("bash", None)), {}).get("content")
    T.check(isinstance(sh, str) and
            ("%d plot.png" % len(r["png"])) in sh,
            "plain: bash counted plot.png's bytes: %r" % (sh,))
    # Unsafe tools run alone: the second TodoWrite started after bash ended.
    # The daemon's own log says so in its order; the example's log does
    # not, as its handlers and its result watcher are tasks of their own,
    # printing in the order the event loop runs them.
    with open(os.path.join(d.tmp, "daemon.log"), encoding="utf-8",
              errors="replace") as f:
        log = f.read().splitlines()

    def first(tool, what):
        return next((k for k, w in enumerate(log)
                     if ": tool %s (" % tool in w and what in w), -1)
    bash_id = kinds.get(("bash", None))
    T.check(0 <= first(bash_id, "): result ok") <
            first(todo[1], "): started"),
            "plain: the last TodoWrite ran after the bash before it")


def interrupted(d):
    r = run(d, True)
    if r is None:
        return
    by = {b["tool_use_id"]: b for b in r["content"]}
    names = {i: name for i, name, _ in r["tools"]}
    task = next(i for i, n in names.items() if n == "Task")
    T.check("%s Task cancelled here: interrupt\n" % task in r["err"],
            "--interrupt: the subagent's handler was cancelled (interrupt)")
    T.eq((by[task]["is_error"], by[task]["content"]),
         (True, "<tool_use_error>Interrupted by user</tool_use_error>"),
         "--interrupt: the subagent's result is the interrupt's")
    esc = next((k for k, (_, w) in enumerate(r["at"])
                if w.startswith("Esc")), None)
    T.check(esc is not None, "--interrupt: Esc was pressed")
    # Tools added after Esc never start: interrupted.
    later = [w.split()[1] for _, w in r["at"][esc:]
             if w.startswith("tool_use ")]
    T.check(len(later) > 0 and all(by[i]["is_error"] and "Interrupted" in
                                   json.dumps(by[i]["content"])
                                   for i in later),
            "--interrupt: tools added after Esc are interrupted: %r"
            % later)


def main():
    def body(d):
        for _ in range(int(pydaemon.scaled(200))):
            if os.path.exists(d.sock):
                break
            time.sleep(0.05)
        for step in (plain, interrupted):
            try:
                step(d)
            except Exception as e:
                T.check(False, "%s raised %r" % (step.__name__, e))
    # At debug the daemon logs each tool's start and result.
    return pydaemon.run(T, body, ["--log-level", "debug"])


if __name__ == "__main__":
    sys.exit(main())
