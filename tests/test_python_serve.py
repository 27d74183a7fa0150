#!/usr/bin/env python3
"""
Client-run tools (ToolDefs with "runner": "client") served by the Python
client, blocking and asyncio, against a real stexecd on a private socket:
the handler API (``session.serve({...})``), ordering with process tools,
progress, content blocks, errors, cancellation, claims and take-over, a
reconnect in the middle of a call, a new client resuming a call, the
grace, a timeout; and read_file of a PNG.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_python_serve.py

Standard library only. Exit 0 when every check passed, 1 otherwise, 77
(skipped) when STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import asyncio
import os
import signal
import struct
import sys
import threading
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))

import stexec  # noqa: E402
from stexec import Client, StexecError, Turn, aio  # noqa: E402
import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

WAIT = pydaemon.scaled(float(os.environ.get("STEXEC_TEST_WAIT", "20")))
GRACE_MS = int(pydaemon.scaled(3000))

T = Checks()

TODO = {"name": "TodoWrite", "description": "the frontend's todo list",
        "runner": "client",
        "inputSchema": {"type": "object",
                        "properties": {"todos": {"type": "array"}},
                        "required": ["todos"]}}
TASK = {"name": "Task", "description": "a subagent", "runner": "client",
        "concurrencySafe": True, "interruptBehavior": "cancel",
        "inputSchema": {"type": "object",
                        "properties": {"prompt": {"type": "string"}},
                        "required": ["prompt"]}}
SLOW = {"name": "Slow", "description": "times out", "runner": "client",
        "timeoutMs": 300}


def png(width=2, height=2):
    """A small valid RGB PNG, made here."""
    def chunk(kind, data):
        body = kind + data
        return (struct.pack(">I", len(data)) + body +
                struct.pack(">I", zlib.crc32(body) & 0xffffffff))
    rows = b"".join(b"\0" + bytes([255, 0, 0]) * width
                    for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0,
                                       0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def until(cond, what, timeout=WAIT):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.01)


def contents(turn):
    return [(r["tool_use_id"], r["content"], r["is_error"])
            for r in turn.results]


# ------------------------------------------------------------ offline

def offline():
    p = png()
    T.eq(stexec.image_media_type(p), "image/png", "PNG by magic bytes")
    T.eq(stexec.image_media_type(b"\xff\xd8\xff\xe0"), "image/jpeg", "JPEG")
    T.eq(stexec.image_media_type(b"GIF87a"), "image/gif", "GIF")
    T.eq(stexec.image_media_type(b"RIFF\0\0\0\0WEBPVP8 "), "image/webp",
         "WebP")
    T.eq(stexec.image_media_type(b"text"), None, "not an image")
    try:
        stexec.image_block(b"text")
        T.check(False, "image_block of text raised nothing")
    except ValueError:
        T.check(True, "image_block of text: ValueError")
    blocks = [stexec.text_block("a plot:"), stexec.image_block(p)]
    T.eq(stexec.content_text(blocks), "a plot:\n[image image/png]",
         "content_text of blocks")
    T.eq(stexec.content_images(blocks), [("image/png", p)],
         "content_images decodes")
    T.eq(stexec._outcome_params("s", "t", {"content": "x",
                                           "isError": True}),
         {"sessionId": "s", "toolUseId": "t", "content": "x",
          "isError": True}, "a {content, isError} outcome")
    # The claims after a reconnect may have the daemon send a call's
    # tool_start again, and the client read it after the call's result was
    # taken: it must not run the call again (seen once in the suite).
    sv = stexec._Serving()
    sv.register("s", {"TodoWrite": lambda input, call: "x"}, None)
    start = {"sessionId": "s", "toolUseId": "t", "name": "TodoWrite",
             "turn": 1}
    action, call, _ = sv.start(start)
    call.outcome, call.sending = {"content": "x"}, True
    sv.sent(call, None)
    T.eq(sv.start(start)[0], "ignore", "a taken call's tool_start again")
    T.eq(sv.release(), [], "...and its result is not sent again")
    T.eq(sv.start(dict(start, turn=2))[0], "run", "the same id next turn")
    T.eq([c.turn for c in sv.calls.values()], [2], "the taken one dropped")


# ------------------------------------------------------------ blocking

def sync_ordering(d):
    """An unsafe client tool between two bash calls holds the second;
    progress; results in add order."""
    c = Client(d.sock, timeout=WAIT)
    sid = c.create_session(tools=[TODO], cwd=d.tmp)
    go = threading.Event()
    seen = []

    def todo_write(input, call):
        seen.append((call.tool_use_id, call.resumed, call.name,
                     threading.current_thread() is not threading.main_thread()))
        call.progress({"step": "saving", "todos": len(input["todos"])})
        go.wait(WAIT)
        return "saved %d todos" % len(input["todos"])

    T.eq(c.session(sid).serve({"TodoWrite": todo_write}), ["TodoWrite"],
         "serve claims the name")
    T.eq(c.served_names(sid), ["TodoWrite"], "served_names")
    turn = Turn(c, sid)
    turn.add("b1", "bash", {"command": "echo one"})
    turn.add("t1", "TodoWrite", {"todos": [{"content": "x"}, {}]})
    turn.add("b2", "bash", {"command": "echo two"})
    # The handler runs while this thread does nothing with the client.
    until(lambda: seen, "the handler to start")
    T.eq(seen, [("t1", False, "TodoWrite", True)],
         "tool_start ran the handler in a thread")
    st = c.status(sid)
    T.eq([t["status"] for t in st["tools"] if t["id"] == "b2"], ["queued"],
         "the second bash waits for the unsafe client tool (S4)")
    go.set()
    notes = list(turn.finish(timeout=WAIT))
    T.eq(contents(turn), [("b1", "one\n", False),
                          ("t1", "saved 2 todos", False),
                          ("b2", "two\n", False)], "results in add order")
    prog = [n.params["data"] for n in notes if n.method == "progress"]
    T.eq(prog, [{"step": "saving", "todos": 2}], "the handler's progress")
    c.close_session(sid)
    c.close()


def sync_results(d):
    """Blocks arrive whole; a raised exception is an error result;
    {content, isError}; read_file of a PNG is an image block."""
    c = Client(d.sock, timeout=WAIT)
    sid = c.create_session(tools=[TODO, TASK], cwd=d.tmp)
    p = png()
    with open(os.path.join(d.tmp, "plot.png"), "wb") as f:
        f.write(p)

    def locked(input, call):
        raise RuntimeError("the todo list is locked")

    c.serve(sid, {"Task": lambda input, call: [
        stexec.text_block("the plot:"), stexec.image_block(p)],
        "TodoWrite": locked})
    turn = Turn(c, sid)
    turn.add("k", "Task", {"prompt": "plot"})
    turn.add("t", "TodoWrite", {"todos": []})
    turn.add("r", "read_file", {"file_path": "plot.png"})
    list(turn.finish(timeout=WAIT))
    by = {r["tool_use_id"]: r for r in turn.results}
    T.eq(by.get("k", {}).get("content"), [
        {"type": "text", "text": "the plot:"},
        {"type": "image", "source": {
            "type": "base64", "media_type": "image/png",
            "data": stexec.image_block(p)["source"]["data"]}}],
        "a mixed text-and-image result arrives whole")
    T.eq((by.get("t", {}).get("content"), by.get("t", {}).get("is_error")),
         ("the todo list is locked", True), "an exception: error result")
    T.eq(stexec.content_images(by.get("r", {}).get("content", "")),
         [("image/png", p)], "read_file of a PNG: an image block of it")
    c.serve(sid, {"TodoWrite": lambda i, call: {"content": "refused",
                                               "isError": True}})
    turn = Turn(c, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    list(turn.finish(timeout=WAIT))
    T.eq(contents(turn), [("t", "refused", True)], "{content, isError}")
    c.close_session(sid)
    c.close()


def sync_cancel(d):
    """An interrupt cancels a cancel client tool at once: its event is
    set; the late result is not reported as an error."""
    c = Client(d.sock, timeout=WAIT)
    sid = c.create_session(tools=[TASK])
    started, reasons, errors = threading.Event(), [], []

    def task(input, call):
        started.set()
        call.cancelled.wait(WAIT)
        reasons.append(call.cancel_reason)
        return "stopped"

    c.serve(sid, {"Task": task}, on_error=lambda e, call: errors.append(e))
    turn = Turn(c, sid)
    turn.add("k", "Task", {"prompt": "forever"})
    T.check(started.wait(WAIT), "the handler started")
    turn.interrupt()
    list(turn.finish(timeout=WAIT))
    T.eq(turn.meta.get("k", {}).get("reason"), "interrupted",
         "the cancel tool was interrupted")
    until(lambda: reasons, "the handler to see the cancel")
    T.eq(reasons, ["interrupt"], "tool_cancel's reason")
    c.ping()
    T.eq(errors, [], "the refused late result is not reported")
    c.close_session(sid)
    c.close()


def sync_claims(d):
    """Two connections cannot both serve a name; take_over moves it."""
    a = Client(d.sock, timeout=WAIT)
    b = Client(d.sock, timeout=WAIT)
    sid = a.create_session(tools=[TODO])
    a.serve(sid, {"TodoWrite": lambda i, call: "from a"})
    try:
        b.serve(sid, {"TodoWrite": lambda i, call: "from b"})
        T.check(False, "a second claim succeeded")
    except StexecError as e:
        T.eq(e.code, stexec.STATE_CONFLICT, "a second claim: -32005")
    T.eq(b.served_names(sid), [], "a refused claim is forgotten")
    T.eq(b.serve(sid, {"TodoWrite": lambda i, call: "from b"},
                 take_over=True), ["TodoWrite"], "take_over")
    turn = Turn(a, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    list(turn.finish(timeout=WAIT))
    T.eq(contents(turn), [("t", "from b", False)], "the new claimant ran it")
    a.close_session(sid)
    a.close()
    b.close()


def sync_reconnect(d):
    """A break in the middle of a call: reconnect() claims again; the call
    runs once and is delivered once. A new client resumes a call of one
    that died. With nobody claiming, the call ends after the grace."""
    c = Client(d.sock, timeout=WAIT)
    sid = c.create_session(tools=[TODO])
    go, runs = threading.Event(), []

    def todo(input, call):
        runs.append(call.resumed)
        go.wait(WAIT)
        return "after the break"

    c.serve(sid, {"TodoWrite": todo})
    turn = Turn(c, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    until(lambda: runs, "the handler to start")
    c._sock.shutdown(2)           # the connection breaks under the client
    until(lambda: not c.connected or c._broken is not None,
          "the break to be seen")
    c.reconnect()
    c.ping()
    go.set()
    list(turn.finish(timeout=WAIT))
    T.eq(runs, [False], "the call ran once")
    T.eq(contents(turn), [("t", "after the break", False)],
         "its result after the reconnect")
    ev = c.events(sid, since=0)["notifications"]
    T.eq(sum(1 for n in ev if n["method"] == "tool_result"), 1,
         "one tool_result")

    # A result made while the connection is down is sent once the names
    # are claimed again, once, and is no error.
    go2, runs2, errors = threading.Event(), [], []

    def todo2(input, call):
        runs2.append(call.tool_use_id)
        go2.wait(WAIT)
        return "made while away"
    c.serve(sid, {"TodoWrite": todo2},
            on_error=lambda e, call: errors.append(e))
    w = Client(d.sock, timeout=WAIT)
    turn = Turn(w, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    until(lambda: runs2, "the handler to start")
    c._sock.shutdown(2)
    until(lambda: c._broken is not None, "the break to be seen")
    go2.set()
    # Made while away: its completeTool met the broken connection.
    def cut_off():
        with c._cond:
            return any(k.again for k in c._serving.calls.values())
    until(cut_off, "its completeTool to find no connection")
    c.reconnect()
    list(turn.finish(timeout=WAIT))
    T.eq(contents(turn), [("t", "made while away", False)],
         "a result made while away is delivered after the reconnect")
    T.eq((runs2, errors), (["t"], []), "once, and no error told")
    w.close()

    # The serving client dies; another claims and gets the call resumed.
    a = Client(d.sock, timeout=WAIT)
    a_ran = threading.Event()
    a.serve(sid, {"TodoWrite": lambda i, call: (a_ran.set(),
                                                threading.Event().wait())},
            take_over=True)
    turn = Turn(c, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    T.check(a_ran.wait(WAIT), "the first client started the call")
    a._sock.shutdown(2)
    a.close()
    b = Client(d.sock, timeout=WAIT)
    got = []
    b.serve(sid, {"TodoWrite": lambda i, call: (got.append(call.resumed),
                                                "b finished it")[1]},
            take_over=True)
    list(turn.finish(timeout=WAIT))
    T.eq(got, [True], "the new claimant got the call with resumed")
    T.eq(contents(turn), [("t", "b finished it", False)], "its result")
    b.close()

    # Nobody serves the name now: the call ends after the grace.
    turn = Turn(c, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    list(turn.finish(timeout=WAIT + GRACE_MS / 1000))
    r = turn.results[0] if turn.results else {}
    T.check(r.get("is_error") is True and
            "no client serves TodoWrite" in stexec.content_text(
                r.get("content", "")),
            "after the grace: %r" % (r,))
    c.close_session(sid)
    c.close()


def sync_reload(d):
    """A reload (SIGHUP) in the middle of a client call: the connection is
    handed over with its claim, the call goes on, runs once and its result
    is delivered once."""
    c = Client(d.sock, timeout=WAIT)
    sid = c.create_session(tools=[TODO])
    go, runs = threading.Event(), []

    def todo(input, call):
        runs.append(call.resumed)
        go.wait(WAIT)
        return "across the reload"
    c.serve(sid, {"TodoWrite": todo})
    turn = Turn(c, sid)
    turn.add("t", "TodoWrite", {"todos": []})
    until(lambda: runs, "the handler to start")
    before = c.initialize()["server"]["instance"]
    d.proc.send_signal(signal.SIGHUP)
    end = time.monotonic() + WAIT
    while c.initialize()["server"]["instance"] == before:
        if time.monotonic() > end:
            raise AssertionError("no reload within %s s" % WAIT)
        time.sleep(0.05)
    T.check(c.connected, "the connection lived through the reload")
    go.set()
    list(turn.finish(timeout=WAIT))
    T.eq(runs, [False], "the call ran once across the reload")
    T.eq(contents(turn), [("t", "across the reload", False)],
         "its result, once, after the reload")
    ev = c.events(sid, since=0)["notifications"]
    T.eq(sum(1 for n in ev if n["method"] == "tool_result"), 1,
         "one tool_result across the reload")
    c.close_session(sid)
    c.close()


# ------------------------------------------------------------ asyncio

async def aio_serve(d):
    c = aio.Client(d.sock, timeout=WAIT)
    await c.connect(timeout=pydaemon.scaled(10))
    async with c:
        sid = await c.create_session(tools=[TODO, TASK, SLOW])
        started, reasons = asyncio.Event(), []

        async def task(input, call):
            started.set()
            try:
                await call.progress({"prompt": input["prompt"]})
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                reasons.append(call.cancel_reason)
                T.check(call.cancelled.is_set(), "the event is set too")
                raise
            return "slept"

        def todo(input, call):     # a plain function: run in a thread
            return "thread %s" % (threading.current_thread()
                                  is not threading.main_thread())

        names = await c.session(sid).serve({"Task": task,
                                            "TodoWrite": todo})
        T.eq(names, ["Task", "TodoWrite"], "aio serve")
        turn = aio.Turn(c, sid)
        await turn.add("t", "TodoWrite", {"todos": []})
        await turn.add("k", "Task", {"prompt": "forever"})
        await asyncio.wait_for(started.wait(), WAIT)
        await turn.interrupt()
        notes = [n async for n in turn.finish(timeout=WAIT)]
        # The result is delivered at once; the task sees its cancel soon.
        for _ in range(int(WAIT * 100)):
            if reasons:
                break
            await asyncio.sleep(0.01)
        T.eq(reasons, ["interrupt"], "aio: tool_cancel cancels the task")
        T.eq(contents(turn)[0], ("t", "thread True", False),
             "aio: a plain handler ran in a thread")
        T.eq(turn.meta.get("k", {}).get("reason"), "interrupted",
             "aio: interrupted")
        T.check(any(n.method == "progress" and
                    n.params["data"] == {"prompt": "forever"}
                    for n in notes), "aio: progress")

        # A timeout delivers the timeout result; a late completeTool: -32005.
        cancelled = asyncio.Event()

        async def slow(input, call):
            try:
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        await c.serve(sid, {"Slow": slow})
        turn = aio.Turn(c, sid)
        await turn.add("s", "Slow", {})
        [n async for n in turn.finish(timeout=WAIT)]
        T.eq(turn.meta.get("s", {}).get("reason"), "timeout",
             "aio: the timeout result")
        T.check(cancelled.is_set(), "aio: the timeout cancelled the task")
        try:
            await c.complete_tool(sid, "s", "too late")
            T.check(False, "a late completeTool succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.STATE_CONFLICT, "a late completeTool: -32005")

        # reconnect() claims again; the call runs once.
        go, runs = asyncio.Event(), []

        async def todo2(input, call):
            runs.append(call.resumed)
            await go.wait()
            return "after the break"
        await c.serve(sid, {"TodoWrite": todo2})
        turn = aio.Turn(c, sid)
        await turn.add("t", "TodoWrite", {"todos": []})
        while not runs:
            await asyncio.sleep(0.01)
        await c.reconnect()
        await c.ping()
        go.set()
        [n async for n in turn.finish(timeout=WAIT)]
        T.eq(runs, [False], "aio: the call ran once across the reconnect")
        T.eq(contents(turn), [("t", "after the break", False)],
             "aio: its result after the reconnect")
        await c.close_session(sid)


def main():
    if os.environ.get("STEXEC_DAEMON"):
        offline()

    def body(d):
        for _ in range(200):
            if os.path.exists(d.sock):
                break
            time.sleep(0.05)
        for step in (sync_ordering, sync_results, sync_cancel, sync_claims,
                     sync_reconnect, sync_reload,
                     lambda d: asyncio.run(aio_serve(d))):
            try:
                step(d)
            except Exception:
                T.check(False, "%s raised:\n%s" % (
                    getattr(step, "__name__", step),
                    traceback.format_exc()))
    return pydaemon.run(T, body, args=("--client-tool-grace-ms",
                                       str(GRACE_MS)))


if __name__ == "__main__":
    sys.exit(main())
