#!/usr/bin/env python3
"""
MCP servers from the npm registry run by the real stexecd:
@modelcontextprotocol/server-everything (listing with annotations, echo,
progress, a tiny image, structured content, resource links, roots,
sampling and elicitation answered by this test, safety from annotations,
an abort of a long call, a long call across a live reload) and
@modelcontextprotocol/server-filesystem:
started with no directory, it learns its roots from the daemon; when the
session's cwd moves, notifications/roots/list_changed makes it ask again;
and a server that allows a write its sandbox does not (its workspace is
its own cwd, elsewhere) is refused by the sandbox, while the same server
under sandbox none writes.

The servers are installed by this test, pinned by tests/mcp's
package-lock.json, into a cache ($STEXEC_TEST_CACHE, else
~/.cache/stexec-tests): once warm it runs offline; cold and without the
registry it says "not run" (exit 77).

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_mcp_npm.py
"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402
import mcp_peer  # noqa: E402
from mcp_peer import add, result, text  # noqa: E402
from peer import new_image  # noqa: E402

T = Checks()
PKG = os.path.join(HERE, "mcp")
AREA = tempfile.mkdtemp(prefix="stexec-mcp-npm-")
SERVERS = ("server-everything", "server-filesystem")


def cache():
    """The node_modules holding the servers, installed once; None when
    they are not there and npm cannot get them."""
    with open(os.path.join(PKG, "package-lock.json"), "rb") as f:
        lock = hashlib.sha256(f.read()).hexdigest()[:16]
    root = os.environ.get("STEXEC_TEST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "stexec-tests")
    where = os.path.join(root, "mcp-" + lock)
    mods = os.path.join(where, "node_modules", "@modelcontextprotocol")

    def warm():
        return all(os.path.exists(os.path.join(mods, s, "dist", "index.js"))
                   for s in SERVERS)
    if warm():
        return mods
    if shutil.which("npm") is None:
        return None
    os.makedirs(where, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(PKG, name), where)
    try:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund",
                        "--loglevel=error"], cwd=where, check=True,
                       timeout=600, stdout=subprocess.DEVNULL)
    except (subprocess.SubprocessError, OSError) as e:
        print("npm ci: %s" % e, file=sys.stderr)
        return None
    return mods if warm() else None


MODS = None


def server(name, *args):
    return {"type": "stdio", "command": shutil.which("node") or "node",
            "args": [os.path.join(MODS, name, "dist", "index.js")] +
            list(args)}


def session(d, **extra):
    return mcp_peer.session(d, AREA, **extra)


def listed(c, server_name, tool):
    """The first mcp_server note of server_name that lists tool."""
    return c.note("mcp_server", lambda p: p["name"] == server_name and
                  p["state"] == "ready" and tool in p["tools"])


def everything(d):
    c, sid = session(d, mcpServers={"everything": server(
        "server-everything", "stdio")},
        mcpAnswers=["sampling", "elicitation"])
    # Its roots, sampling and elicitation tools come once it knows we
    # answer them: a tools/list_changed, listed again.
    listed(c, "everything", "mcp__everything__trigger-sampling-request")
    tools = {t["name"]: t for t in c.ok("listTools", sessionId=sid)["tools"]}
    echo = tools.get("mcp__everything__echo", {})
    T.eq(echo.get("annotations", {}).get("readOnlyHint"), True,
         "echo's annotations are listed")
    T.eq(echo.get("concurrencySafe"), True, "readOnlyHint true: safe")
    samp = tools.get("mcp__everything__trigger-sampling-request", {})
    T.eq(samp.get("annotations", {}).get("readOnlyHint"), False,
         "trigger-sampling-request is not read-only")
    T.eq(samp.get("concurrencySafe"), False, "readOnlyHint false: not safe")
    T.eq(samp.get("interruptBehavior"), "block", "...and block")
    states = {s["name"]: s for s in c.ok("listTools",
                                         sessionId=sid)["mcpServers"]}
    T.eq(states["everything"].get("protocolVersion"), "2025-11-25",
         "it speaks 2025-11-25 with us")

    add(c, sid, "e1", "mcp__everything__echo", {"message": "hello"})
    T.eq(text(result(c, "e1")), "Echo: hello", "echo")

    add(c, sid, "p1", "mcp__everything__trigger-long-running-operation",
        {"duration": 1, "steps": 3})
    prog = [c.note("progress", lambda p: p["toolUseId"] == "p1")["data"]
            for _ in range(3)]
    T.eq([(p["progress"], p["total"]) for p in prog], [(1, 3), (2, 3),
         (3, 3)], "progress streams")
    T.check("Long running operation completed" in text(result(c, "p1")),
            "the long operation's result")

    add(c, sid, "i1", "mcp__everything__get-tiny-image", {})
    blocks = result(c, "i1")["result"]["content"]
    images = [b for b in blocks if b.get("type") == "image"]
    T.check(len(images) == 1 and images[0]["source"]["media_type"] ==
            "image/png", "get-tiny-image gives an image block: %r" %
            [b.get("type") for b in blocks])

    add(c, sid, "s1", "mcp__everything__get-structured-content",
        {"location": "Chicago"})
    r = result(c, "s1")
    sc = r["meta"].get("mcp", {}).get("structuredContent", {})
    T.check("temperature" in sc, "structuredContent in meta.mcp: %r" %
            r["meta"])

    add(c, sid, "l1", "mcp__everything__get-resource-links", {"count": 2})
    t = text(result(c, "l1"))
    T.check(t.count("[a resource link:") == 2, "its resource links as "
            "text: %r" % t[:300])

    add(c, sid, "r1", "mcp__everything__get-roots-list", {})
    t = text(result(c, "r1"))
    T.check(AREA in t, "get-roots-list shows the session's cwd: %r" %
            t[:300])

    add(c, sid, "x1", "mcp__everything__trigger-sampling-request",
        {"prompt": "Say hi", "maxTokens": 20})
    req = c.note("mcp_request", lambda p: p["method"] ==
                 "sampling/createMessage")
    T.eq(req["server"], "everything", "sampling from its server")
    c.ok("respondMcp", sessionId=sid, requestId=req["requestId"],
         result={"role": "assistant", "model": "stexec-test",
                 "stopReason": "endTurn",
                 "content": {"type": "text", "text": "hi from the test"}})
    T.check("hi from the test" in text(result(c, "x1")),
            "the sampling answer reaches the tool's result")

    add(c, sid, "x2", "mcp__everything__trigger-elicitation-request", {})
    req = c.note("mcp_request", lambda p: p["method"] ==
                 "elicitation/create")
    c.ok("respondMcp", sessionId=sid, requestId=req["requestId"],
         result={"action": "accept", "content": {"name": "Ada Lovelace",
                                                 "check": True}})
    T.check("Ada Lovelace" in text(result(c, "x2")),
            "the elicitation answer reaches the tool's result")

    # An abort (interrupt) cancels a long read-only call.
    add(c, sid, "a1", "mcp__everything__trigger-long-running-operation",
        {"duration": 60, "steps": 60})
    c.note("progress", lambda p: p["toolUseId"] == "a1")
    c.ok("abort", sessionId=sid, reason="interrupt")
    r = result(c, "a1")
    T.eq(r["meta"].get("reason"), "interrupted", "the long call is "
         "cancelled")
    c.ok("drain", sessionId=sid)
    add(c, sid, "e2", "mcp__everything__echo", {"message": "after"})
    T.eq(text(result(c, "e2")), "Echo: after", "served after the abort")

    # A live reload hands the real server and its call in flight over.
    def pid():
        return {s["name"]: s for s in c.ok(
            "listTools", sessionId=sid)["mcpServers"]}["everything"].get(
            "pid")
    before_pid = pid()
    steps = int(pydaemon.scaled(4))
    add(c, sid, "h1", "mcp__everything__trigger-long-running-operation",
        {"duration": steps, "steps": steps})
    c.note("progress", lambda p: p["toolUseId"] == "h1")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    T.eq(pid(), before_pid, "the same server process after the reload")
    r = result(c, "h1")
    T.check("Long running operation completed" in text(r) and
            r["meta"].get("reason") != "daemon_restarted",
            "a long call across a reload delivers its result: %r" %
            text(r)[:200])
    T.check(not any(n.get("method") == "tool_result" and
                    n["params"]["toolUseId"] == "h1" for n in c.notes),
            "once")
    c.ok("closeSession", sessionId=sid)
    c.close()


def filesystem(d):
    with open(os.path.join(AREA, "hello.txt"), "w") as f:
        f.write("hello from the cwd\n")
    outside = tempfile.mkdtemp(prefix="stexec-mcp-outside-")
    with open(os.path.join(outside, "secret.txt"), "w") as f:
        f.write("secret\n")
    try:
        c, sid = session(d, mcpServers={"fs": server("server-filesystem")})
        mcp_peer.ready(c, "fs")
        # It takes the roots it asked for on initialized asynchronously
        # (a realpath each): until then it allows nothing ("not in ").
        deadline = time.monotonic() + mcp_peer.GUARD
        n = 0
        while True:
            n += 1
            add(c, sid, "f1-%d" % n, "mcp__fs__read_text_file",
                {"path": os.path.join(AREA, "hello.txt")})
            r = result(c, "f1-%d" % n)
            if (not text(r).endswith("not in ") or
                    time.monotonic() > deadline):
                break
            time.sleep(0.05)
        T.check("hello from the cwd" in text(r), "it reads inside the "
                "session's cwd, its root from roots/list: %r" % text(r))
        add(c, sid, "f2", "mcp__fs__read_text_file",
            {"path": os.path.join(outside, "secret.txt")})
        r = result(c, "f2")
        T.check(r["result"]["is_error"] and "Access denied" in text(r) and
                "secret\n" not in text(r),
                "outside its roots it is refused: %r" % text(r))
        c.ok("closeSession", sessionId=sid)
        c.close()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def roots_moved(d):
    """The session's cwd moves (the built-in bash keeps it): the server is
    told its roots changed, asks again, and allows the new directory."""
    sub = os.path.join(AREA, "moved-here")
    os.makedirs(sub, exist_ok=True)
    c, sid = session(d, mcpServers={"fs": server("server-filesystem")},
                     shell={"keepCwd": True})
    mcp_peer.ready(c, "fs")
    add(c, sid, "m0", "bash", {"command": "cd moved-here && pwd"})
    T.check(sub in text(result(c, "m0")), "bash moved the session's cwd")
    # It asks roots/list on the notification and takes the answer
    # asynchronously (a realpath each): asked until it shows, guarded.
    deadline = time.monotonic() + mcp_peer.GUARD
    n = 0
    while True:
        n += 1
        add(c, sid, "m%d" % n, "mcp__fs__list_allowed_directories", {})
        t = text(result(c, "m%d" % n))
        if sub in t or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    T.check(sub in t, "after roots/list_changed its allowed directories "
            "are the new cwd: %r" % t)
    c.ok("closeSession", sessionId=sid)
    c.close()


def tricked(d):
    """server-filesystem is told the session's cwd (its directory argument
    and the roots the daemon answers) while its own cwd, the workspace its
    sandbox lets it write, is elsewhere: it allows write_file in the
    session's cwd, and under workspace-write the sandbox refuses it; the
    same server under sandbox none writes the file."""
    probe = mcp_peer.Peer(d.sock)
    caps = probe.ok("initialize")["capabilities"]
    probe.close()
    profiles = caps.get("enforcement", {}).get("sandbox", {}).get(
        "profiles", [])
    work = tempfile.mkdtemp(prefix="stexec-mcp-work-")
    try:
        modes = ["none"]
        if "workspace-write" in profiles:
            modes.insert(0, "workspace-write")
        else:
            print("the sandbox refusing a tricked server: not run (this "
                  "host cannot sandbox: %r)" % caps.get("enforcement", {})
                  .get("sandbox", {}).get("whyNot"))
        for mode in modes:
            target = os.path.join(AREA, "tricked-%s.txt" % mode)
            fs = server("server-filesystem", AREA)
            fs.update(cwd=work, sandbox=mode)
            c, sid = session(d, mcpServers={"fs": fs})
            mcp_peer.ready(c, "fs")
            add(c, sid, "w-" + mode, "mcp__fs__write_file",
                {"path": target, "content": "written by the server\n"})
            r = result(c, "w-" + mode)
            t = text(r)
            if mode == "none":
                T.check(not r["result"]["is_error"] and
                        os.path.exists(target), "sandbox none: the same "
                        "server writes there: %r" % t)
            else:
                T.check(r["result"]["is_error"] and not
                        os.path.exists(target) and
                        ("EACCES" in t or "EROFS" in t or "EPERM" in t),
                        "workspace-write: the sandbox refuses the write "
                        "the server allowed: %r" % t)
                T.check("Access denied" not in t, "...the sandbox, not "
                        "the server: %r" % t)
            c.ok("closeSession", sessionId=sid)
            c.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def body(d):
    deadline = time.monotonic() + mcp_peer.GUARD
    while not os.path.exists(d.sock):
        if time.monotonic() > deadline or d.proc.poll() is not None:
            raise AssertionError("the daemon did not start")
        time.sleep(0.05)
    everything(d)
    filesystem(d)
    roots_moved(d)
    tricked(d)
    deadline = time.monotonic() + mcp_peer.GUARD
    while d.leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    global MODS
    if not os.environ.get("STEXEC_DAEMON"):
        print("STEXEC_DAEMON is not set: skipped")
        return 77
    if shutil.which("node") is None:
        print("not run: no node")
        return 77
    MODS = cache()
    if MODS is None:
        print("not run: the npm registry is unreachable and the cache of "
              "MCP servers is cold")
        return 77
    try:
        return pydaemon.run(T, body)
    finally:
        shutil.rmtree(AREA, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
