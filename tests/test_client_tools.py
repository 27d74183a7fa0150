#!/usr/bin/env python3
"""
Client-run tools against the real stexecd (doc/design.md §7, Client-run
tools; PROTOCOL.md §4, serveTools): a connection serves tools that live in
the frontend (TodoWrite, Task) while the daemon orders them with its own
bash and read_file calls; cascade, interrupt, timeout, a dropped serving
connection, claims, and content blocks. Raw JSON-RPC, so that it tests the
daemon, not a client.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_client_tools.py
"""
import base64
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import zlib
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peer  # noqa: E402
import pydaemon  # noqa: E402
from peer import Peer, add, new_image  # noqa: E402
from pydaemon import Checks  # noqa: E402

T = Checks()
AREA = tempfile.mkdtemp(prefix="stexec-client-tools-")
# One generous guard against a hang: every wait below is for an event.
GUARD = pydaemon.scaled(120)
# Given to the daemon, so scaled too (tests/README.md): a claim made right
# after a call was added must come within it.
GRACE_MS = int(pydaemon.scaled(400))

TOOLS = [
    {"name": "TodoWrite", "runner": "client",
     "inputSchema": {"type": "object",
                     "properties": {"todos": {"type": "array"}},
                     "required": ["todos"]}},
    {"name": "Task", "runner": "client", "concurrencySafe": True,
     "interruptBehavior": "cancel", "abortSiblingsOnError": True},
    {"name": "Slow", "runner": "client", "timeoutMs": 300},
]


def session(d, **extra):
    return peer.session(d, AREA, tools=TOOLS, **extra)


def results(c, n):
    """The next n tool_results, in the order they came."""
    return [c.note("tool_result") for _ in range(n)]


def ordering(d):
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite", "Task"])
    # An unsafe client tool between two bash calls holds the second.
    add(c, sid, "b1", "bash", {"command": "echo one"})
    add(c, sid, "todo", "TodoWrite", {"todos": [{"content": "x"}]})
    add(c, sid, "b2", "bash", {"command": "echo two"})
    start = c.note("tool_start")
    T.eq((start["toolUseId"], start["name"], start["input"]),
         ("todo", "TodoWrite", {"todos": [{"content": "x"}]}),
         "tool_start names the call and its input")
    T.check("resumed" not in start, "a first start is not resumed")
    st = c.ok("status", sessionId=sid)
    states = {t["id"]: t["status"] for t in st["tools"]}
    T.eq(states.get("b2"), "queued", "the second bash waits for the "
         "unsafe client tool")
    todo = [t for t in st["tools"] if t["id"] == "todo"][0]
    T.eq((todo.get("runner"), "pid" in todo, "waitingForClient" in todo),
         ("client", False, False), "status shows who runs it")
    c.ok("toolProgress", sessionId=sid, toolUseId="todo",
         progress={"done": 1})
    p = c.note("progress", lambda p: p["toolUseId"] == "todo")
    T.eq(p["data"], {"done": 1}, "toolProgress is a progress notification")
    c.ok("completeTool", sessionId=sid, toolUseId="todo",
         content="Todos updated")
    rs = results(c, 3)
    T.eq([r["toolUseId"] for r in rs], ["b1", "todo", "b2"],
         "results in add order")
    T.eq(rs[1]["result"]["content"], "Todos updated", "the client's result")
    T.eq(rs[1]["meta"]["exitCode"], None, "a client tool has no exit code")
    T.eq(rs[2]["result"]["content"], "two\n", "the second bash ran after")
    c.ok("drain", sessionId=sid)

    # Two safe client tools run side by side with two read_files.
    with open(os.path.join(AREA, "a.txt"), "w") as f:
        f.write("alpha\n")
    add(c, sid, "t1", "Task", {"prompt": "one"})
    add(c, sid, "r1", "read_file", {"file_path": os.path.join(AREA,
                                                              "a.txt")})
    add(c, sid, "t2", "Task", {"prompt": "two"})
    add(c, sid, "r2", "read_file", {"file_path": os.path.join(AREA,
                                                              "a.txt")})
    s1 = c.note("tool_start")
    s2 = c.note("tool_start")
    T.eq(sorted([s1["toolUseId"], s2["toolUseId"]]), ["t1", "t2"],
         "both safe client tools start before either ends")
    c.ok("completeTool", sessionId=sid, toolUseId="t2", content="second")
    c.ok("completeTool", sessionId=sid, toolUseId="t1", content="first")
    rs = results(c, 4)
    T.eq([r["toolUseId"] for r in rs], ["t1", "r1", "t2", "r2"],
         "results in add order")
    T.eq([rs[0]["result"]["content"], rs[2]["result"]["content"]],
         ["first", "second"], "each its own result")
    c.close()


def cascade_and_abort(d):
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["Task", "TodoWrite"])
    add(c, sid, "t", "Task", {})
    add(c, sid, "t2", "Task", {})
    # The bash is unsafe: it waits for both.
    add(c, sid, "b", "bash", {"command": "sleep 600"})
    c.note("tool_start", lambda p: p["toolUseId"] == "t")
    c.note("tool_start", lambda p: p["toolUseId"] == "t2")
    c.ok("completeTool", sessionId=sid, toolUseId="t", content="boom",
         isError=True)
    cancel = c.note("tool_cancel")
    T.eq((cancel["toolUseId"], cancel["reason"]), ("t2", "sibling_error"),
         "a cascading error cancels the sibling client tool")
    rs = results(c, 3)
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in rs],
         [("t", "error"), ("t2", "sibling_error"), ("b", "sibling_error")],
         "S7 for a client tool's error")
    T.check(rs[0]["result"]["is_error"], "isError makes an error result")
    late = c.call("completeTool", sessionId=sid, toolUseId="t2",
                  content="late")
    T.eq(late.get("error", {}).get("code"), -32005,
         "a completeTool after the result gets -32005")
    c.ok("drain", sessionId=sid)

    # An interrupt cancels a cancel tool at once; a block tool finishes.
    add(c, sid, "k", "Task", {})
    c.note("tool_start", lambda p: p["toolUseId"] == "k")
    c.ok("abort", sessionId=sid, reason="interrupt")
    T.eq(c.note("tool_cancel")["reason"], "interrupt",
         "tool_cancel says why")
    r = c.note("tool_result")
    T.eq((r["toolUseId"], r["meta"]["reason"]), ("k", "interrupted"),
         "the cancel tool's result comes without its answer")
    c.ok("drain", sessionId=sid)
    add(c, sid, "w", "TodoWrite", {"todos": []})
    c.note("tool_start", lambda p: p["toolUseId"] == "w")
    c.ok("abort", sessionId=sid, reason="interrupt")
    T.check(not any(n.get("method") == "tool_cancel" for n in c.notes),
            "a block tool is not cancelled by an interrupt")
    c.ok("completeTool", sessionId=sid, toolUseId="w", content="saved")
    r = c.note("tool_result")
    T.eq((r["meta"]["reason"], r["result"]["content"]), ("ok", "saved"),
         "the block tool finishes")
    c.ok("drain", sessionId=sid)
    # A hard abort cancels a block tool: its answer within the kill grace
    # ends it, in the words a killed process gets.
    add(c, sid, "h", "TodoWrite", {"todos": []})
    c.note("tool_start", lambda p: p["toolUseId"] == "h")
    c.ok("abort", sessionId=sid, reason="cancel")
    T.eq(c.note("tool_cancel")["reason"], "abort", "tool_cancel: abort")
    c.ok("completeTool", sessionId=sid, toolUseId="h", content="half")
    r = c.note("tool_result")
    T.eq((r["toolUseId"], r["meta"]["reason"]), ("h", "interrupted"),
         "a hard abort's result")
    c.ok("drain", sessionId=sid)
    # A discard cancels a cancel tool; nothing of the turn is delivered.
    add(c, sid, "dd", "Task", {})
    c.note("tool_start", lambda p: p["toolUseId"] == "dd")
    c.ok("discard", sessionId=sid)
    T.eq(c.note("tool_cancel")["reason"], "discard", "tool_cancel: discard")
    e = c.call("completeTool", sessionId=sid, toolUseId="dd", content="x")
    T.eq(e.get("error", {}).get("code"), -32005, "a discarded call is over")
    c.close()


def timeout(d):
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["Slow"])
    add(c, sid, "s", "Slow", {})
    c.note("tool_start")
    T.eq(c.note("tool_cancel")["reason"], "timeout", "tool_cancel: timeout")
    # A block tool waits its kill grace for the answer; it comes.
    c.ok("completeTool", sessionId=sid, toolUseId="s", content="too late")
    r = c.note("tool_result")
    T.eq((r["meta"]["reason"], r["result"]["content"]),
         ("timeout", "Error: timed out after 300 ms"),
         "S16: the timeout result, in a process's words")
    late = c.call("completeTool", sessionId=sid, toolUseId="s",
                  content="later")
    T.eq(late.get("error", {}).get("code"), -32005, "then -32005")
    c.close()


def dropped(d):
    c, sid = session(d)
    server = Peer(d.sock)
    server.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    add(c, sid, "x", "TodoWrite", {"todos": []})
    server.note("tool_start")
    server.close()
    # A new connection claims the name and gets the call again.
    again = Peer(d.sock)
    again.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    s = again.note("tool_start")
    T.eq((s["toolUseId"], s.get("resumed")), ("x", True),
         "the call starts again on the new connection, resumed")
    again.ok("completeTool", sessionId=sid, toolUseId="x", content="done")
    r = c.note("tool_result")
    T.eq(r["result"]["content"], "done", "its result is delivered once")
    again.close()
    c.ok("drain", sessionId=sid)
    # Nobody claims it: the grace ends it with an error.
    add(c, sid, "y", "TodoWrite", {"todos": []})
    r = c.note("tool_result")
    T.eq((r["meta"]["reason"], r["result"]["content"]),
         ("error", "<tool_use_error>Error: no client serves TodoWrite: no "
          "connection claimed it (serveTools)</tool_use_error>"),
         "past the grace, the call ends as an error")
    # Claimed after it was added: a call waits for its server.
    add(c, sid, "z", "TodoWrite", {"todos": []})
    late = Peer(d.sock)
    late.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    s = late.note("tool_start")
    T.eq((s["toolUseId"], "resumed" in s), ("z", False),
         "a claim after the add starts the waiting call")
    late.close()
    r = c.note("tool_result")
    T.eq(r["result"]["content"], "<tool_use_error>Error: no client serves "
         "TodoWrite: its connection closed</tool_use_error>",
         "a server that goes and never comes back: the error says so")
    c.close()


def claims(d):
    c, sid = session(d)
    other = Peer(d.sock)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    e = other.call("serveTools", sessionId=sid, names=["TodoWrite", "Task"])
    T.eq(e.get("error", {}).get("code"), -32005,
         "a second claim of a served name is refused")
    T.check("takeOver" in e.get("error", {}).get("message", ""),
            "the refusal says how to take it")
    add(c, sid, "q", "TodoWrite", {"todos": []})
    c.note("tool_start")
    other.ok("serveTools", sessionId=sid, names=["TodoWrite"],
             takeOver=True)
    T.eq(c.note("tool_cancel")["reason"], "taken_over",
         "the old server is told")
    s = other.note("tool_start")
    T.eq((s["toolUseId"], s.get("resumed")), ("q", True),
         "the new server gets the call")
    e = c.call("completeTool", sessionId=sid, toolUseId="q", content="x")
    T.eq(e.get("error", {}).get("code"), -32005,
         "the old server can no longer complete it")
    other.ok("completeTool", sessionId=sid, toolUseId="q", content="y")
    T.eq(c.note("tool_result")["result"]["content"], "y", "the new answer")
    for names, field in (([], "names"), (["bash"], "names[0]"),
                         ([7], "names[0]"), (["\u00e9" * 5000], "names[0]")):
        e = c.call("serveTools", _check=False, sessionId=sid, names=names)
        T.eq(e.get("error", {}).get("code"), -32602,
             "serveTools %r: -32602" % (names[:1],))
        T.check(e.get("error", {}).get("message", "").startswith(
            "Invalid params: " + field), "names the field: %.80r"
            % e.get("error", {}).get("message"))
        T.eq(e.get("error", {}).get("data", {}).get("field"), field,
             "data.field")
    for params, field in (({"toolUseId": "nope", "content": "x"}, None),
                          ({"toolUseId": "q"}, "content"),
                          ({"toolUseId": "q", "content": 5}, "content"),
                          ({"toolUseId": "q", "content": "x",
                            "isError": "yes"}, "isError")):
        e = c.call("completeTool", _check=False, sessionId=sid, **params)
        if field is None:
            T.eq(e.get("error", {}).get("code"), -32005,
                 "completeTool of an unknown call: -32005")
        else:
            T.eq(e.get("error", {}).get("code"), -32602,
                 "completeTool without a good %s: -32602" % field)
    # Long non-ASCII strings on every error path: each answer is whole,
    # valid UTF-8 (Peer parses it strictly), and names the problem.
    long_id = "\u00e9\u4e2d" * 3000
    for method, params in (("completeTool", {"content": "x"}),
                           ("toolProgress", {"progress": 1}),
                           ("completeTool", {"content": [
                               {"type": "text", "text": "x",
                                long_id: 1}]})):
        e = c.call(method, _check=False, sessionId=sid, toolUseId=long_id,
                   **params)
        T.check(e.get("error", {}).get("code") in (-32005, -32602) and
                len(e["error"]["message"]) < 2000, "%s with a long id: %.100r"
                % (method, e))
    other.close()
    c.close()


def png(w, h):
    """A real PNG of w x h pixels, one grey level."""
    raw = b"".join(b"\0" + b"\x80" * w for _ in range(h))
    chunk = (lambda t, data: struct.pack(">I", len(data)) + t + data
             + struct.pack(">I", zlib.crc32(t + data) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def blocks(d):
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    img = base64.b64encode(png(4, 3)).decode()
    mixed = [{"type": "text", "text": "a plot:"},
             {"type": "image", "source": {"type": "base64",
                                          "media_type": "image/png",
                                          "data": img}}]
    add(c, sid, "m", "TodoWrite", {"todos": []})
    c.note("tool_start")
    bad = c.call("completeTool", _check=False, sessionId=sid,
                 toolUseId="m",
                 content=[{"type": "image", "source": {
                     "type": "base64", "media_type": "image/tiff",
                     "data": img}}])
    T.eq(bad.get("error", {}).get("code"), -32602, "a bad block: -32602")
    T.check("content[0].source.media_type" in bad.get("error", {})
            .get("message", ""), "naming the place: %.120r" % bad)
    c.ok("completeTool", sessionId=sid, toolUseId="m", content=mixed)
    r = c.note("tool_result")
    T.eq(r["result"]["content"], mixed,
         "a mixed text-and-image result arrives whole (after a refused one)")
    # Over maxResultBytes (100000 by default): bounded, nothing lost.
    add(c, sid, "big", "TodoWrite", {"todos": []})
    c.note("tool_start")
    text = "".join("line %06d\n" % i for i in range(30000))
    c.ok("completeTool", sessionId=sid, toolUseId="big", content=text)
    r = c.note("tool_result")
    content, meta = r["result"]["content"], r["meta"]
    T.check(len(content) < 110000, "the text is bounded")
    T.check(content.startswith("line 000000") and
            content.endswith("line 029999\n"), "head and tail kept")
    T.check(meta["truncated"] and meta["fullOutputPath"], "meta says where")
    with open(meta["fullOutputPath"]) as f:
        T.eq(f.read(), text, "the whole result is in the file")
    add(c, sid, "bigb", "TodoWrite", {"todos": []})
    c.note("tool_start")
    many = [{"type": "text", "text": "x" * 40000} for _ in range(4)] + mixed
    c.ok("completeTool", sessionId=sid, toolUseId="bigb", content=many)
    r = c.note("tool_result")
    got = r["result"]["content"]
    T.eq(got[:2], many[:2], "the blocks that fit are kept in order")
    T.check(len(got) == 3 and "result truncated: 2 of its 6 blocks"
            in got[2]["text"], "then a block says what was left out: %.200r"
            % got[-1:])
    with open(r["meta"]["fullOutputPath"]) as f:
        T.eq(json.load(f), many, "the whole result, as JSON, in the file")
    c.close()


def images(d):
    c, sid = session(d)
    shot = png(5, 7)
    # An image by its magic bytes, not its name.
    path = os.path.join(AREA, "screenshot.txt")
    with open(path, "wb") as f:
        f.write(shot)
    with open(os.path.join(AREA, "not-an-image.png"), "w") as f:
        f.write("just text\n")
    gif = b"GIF89a" + struct.pack("<HH", 640, 480) + b"\0" * 20
    with open(os.path.join(AREA, "anim.gif"), "wb") as f:
        f.write(gif)
    with open(os.path.join(AREA, "huge.png"), "wb") as f:
        f.write(png(9000, 2))
    add(c, sid, "i1", "read_file", {"file_path": path})
    add(c, sid, "i2", "read_file",
        {"file_path": os.path.join(AREA, "not-an-image.png")})
    add(c, sid, "i3", "read_file",
        {"file_path": os.path.join(AREA, "anim.gif")})
    add(c, sid, "i4", "read_file",
        {"file_path": os.path.join(AREA, "huge.png")})
    rs = results(c, 4)
    blocks = rs[0]["result"]["content"]
    T.check(isinstance(blocks, list) and len(blocks) == 1 and
            blocks[0]["type"] == "image", "read_file of a PNG gives an "
            "image block: %.200r" % (blocks,))
    if isinstance(blocks, list) and blocks:
        src = blocks[0]["source"]
        T.eq((src["type"], src["media_type"]), ("base64", "image/png"),
             "its source")
        T.eq(base64.b64decode(src["data"]), shot,
             "its data decodes to the file")
    T.eq(rs[1]["result"]["content"], "     1\tjust text\n",
         "a text file named .png is text")
    T.eq(rs[2]["result"]["content"][0]["source"]["media_type"], "image/gif",
         "a GIF")
    T.check(rs[3]["result"]["is_error"] and "9000 x 2 pixels" in
            rs[3]["result"]["content"] and "not rescaled" in
            rs[3]["result"]["content"], "a 9000-pixel image is refused in "
            "words: %.200r" % rs[3]["result"]["content"])
    c.close()


def reload(d):
    c, sid = session(d)
    server = Peer(d.sock)
    server.ok("serveTools", sessionId=sid, names=["TodoWrite", "Task"])
    add(c, sid, "r1", "TodoWrite", {"todos": []})
    server.note("tool_start", lambda p: p["toolUseId"] == "r1")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    # The carried connection still serves: the call goes on there.
    server.ok("completeTool", sessionId=sid, toolUseId="r1",
              content="across")
    r = c.note("tool_result")
    T.eq((r["toolUseId"], r["result"]["content"]), ("r1", "across"),
         "a reload in the middle of a client call delivers its result")
    c.ok("drain", sessionId=sid)
    T.check(not any(n.get("method") == "tool_result" for n in c.notes),
            "...once")
    # Its claims came across too: a new call starts on it.
    add(c, sid, "r2", "Task", {})
    s = server.note("tool_start", lambda p: p["toolUseId"] == "r2")
    T.check("resumed" not in s, "a new call after the reload is new")
    server.ok("completeTool", sessionId=sid, toolUseId="r2", content="ok")
    T.eq(c.note("tool_result")["toolUseId"], "r2", "and completes")
    server.close()
    c.close()


def crash(d):
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    add(c, sid, "k1", "TodoWrite", {"todos": []})
    c.note("tool_start")
    c.close()
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    d.log.close()
    d.start()
    guard = time.monotonic() + GUARD
    while True:
        try:
            c = Peer(d.sock)
            break
        except OSError:
            if time.monotonic() > guard:
                raise
            time.sleep(0.05)
    c.ok("drain", sessionId=sid)
    got = [n["params"] for n in c.ok("events", sessionId=sid)["notifications"]
           if n["method"] == "tool_result"]
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in got],
         [("k1", "daemon_restarted")],
         "after a crash, a client call gets daemon_restarted (S10)")
    c.close()


def left_running(d):
    """Calls still running when the daemon stops: it stops cleanly (run()
    checks its exit status)."""
    c, sid = session(d)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite", "Task"])
    add(c, sid, "l1", "Task", {})
    add(c, sid, "l2", "TodoWrite", {"todos": []})
    c.note("tool_start", lambda p: p["toolUseId"] == "l1")
    c2, sid2 = session(d)
    add(c2, sid2, "l3", "TodoWrite", {"todos": []})
    T.eq(c2.ok("status", sessionId=sid2)["tools"][0].get(
        "waitingForClient"), True, "an unserved call waits for a client")


def body(d):
    guard = time.monotonic() + GUARD
    while not os.path.exists(d.sock) and time.monotonic() < guard:
        time.sleep(0.05)
    ordering(d)
    cascade_and_abort(d)
    timeout(d)
    dropped(d)
    claims(d)
    blocks(d)
    images(d)
    reload(d)
    crash(d)
    left_running(d)


if __name__ == "__main__":
    try:
        rc = pydaemon.run(T, body, ["--client-tool-grace-ms", str(GRACE_MS),
                                    "--kill-grace-ms", "60000"])
    finally:
        shutil.rmtree(AREA, ignore_errors=True)
    sys.exit(rc)
