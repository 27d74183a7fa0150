#!/usr/bin/env python3
"""
MCP servers run by the daemon (doc/design.md §7, MCP servers) against the
real stexecd and the hostile fake server of tests/mcp_fake_server.py: the
operator's --mcp-config and a createSession's mcpServers, listTools with
states and annotations, calls in the executor (echo, image and structured
content, progress, abort, a crash mid-call), roots, a sampling request
answered by the client (mcp_request, respondMcp), a failed server's calls,
a call made while its server starts, errors naming their field, and
nothing left behind. Raw JSON-RPC.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_mcp_session.py
"""
import json
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
from mcp_peer import GUARD, Peer, add, ready, result, text  # noqa: E402
from peer import new_image  # noqa: E402

T = Checks()
FAKE = os.path.join(HERE, "mcp_fake_server.py")
AREA = tempfile.mkdtemp(prefix="stexec-mcp-area-")
CONF = os.path.join(AREA, "operator.mcp.json")


def fake(*modes, **extra):
    srv = {"type": "stdio", "command": "python3", "args": [FAKE] + list(modes)}
    srv.update(extra)
    return srv


def session(d, **extra):
    return mcp_peer.session(d, AREA, **extra)


def listing(d):
    c, sid = session(d, mcpServers={"fake": fake()})
    ready(c, "fake")
    ready(c, "op")
    lt = c.ok("listTools", sessionId=sid)
    tools = {t["name"]: t for t in lt["tools"]}
    echo = tools.get("mcp__fake__echo")
    if T.check(echo is not None, "mcp__fake__echo is listed"):
        T.eq(echo.get("annotations"), {"readOnlyHint": True},
             "its annotations are shown")
        T.eq(echo.get("concurrencySafe"), True, "readOnlyHint: safe")
        T.eq(echo.get("interruptBehavior"), "cancel", "read-only: cancel")
        T.eq(echo.get("mcpServer"), "fake", "its server is named")
        T.eq(echo["inputSchema"]["required"], ["text"], "its inputSchema")
    crash = tools.get("mcp__fake__crash", {})
    T.eq(crash.get("concurrencySafe"), False, "destructive: not safe")
    T.eq(crash.get("interruptBehavior"), "block", "not read-only: block")
    T.check("mcp__fake__weird_name_x" in tools,
            "a name outside [A-Za-z0-9_-] is sanitized")
    T.check("mcp__op__echo" in tools, "the operator's server is listed")
    states = {s["name"]: s for s in lt["mcpServers"]}
    T.eq(states.get("fake", {}).get("state"), "ready", "fake is ready")
    T.eq(states.get("fake", {}).get("protocolVersion"), "2025-11-25",
         "the newest revision both know")
    T.eq(states.get("op", {}).get("state"), "ready", "op is ready")
    # Input is checked against the server's schema (S2).
    add(c, sid, "bad", "mcp__fake__echo", {"text": 5})
    r = result(c, "bad")
    T.check(r["result"]["is_error"] and "InputValidationError" in text(r),
            "input is validated against inputSchema: %r" % text(r))
    c.ok("closeSession", sessionId=sid)
    # Its reply comes once the servers' processes are gone (S18).
    T.eq(d.leftovers(), [], "closeSession answers once its servers are gone")
    c.close()


def calls(d):
    c, sid = session(d, mcpServers={"fake": fake()})
    # Made while the server starts: it waits for it.
    add(c, sid, "e1", "mcp__fake__echo", {"text": "early"})
    r = result(c, "e1")
    T.eq(text(r), "echo: early", "a call made while it starts waits")
    T.eq(r["result"]["is_error"], False, "echo is no error")
    add(c, sid, "i1", "mcp__fake__image", {})
    r = result(c, "i1")
    content = r["result"]["content"]
    T.eq(content[0].get("type"), "image", "an image block")
    T.eq(content[0].get("source", {}).get("media_type"), "image/png",
         "its media type")
    T.check("a resource link: y.txt <file:///x/y.txt>" in text(r),
            "a resource link as text: %r" % text(r))
    T.eq(r["meta"].get("mcp"), {"structuredContent": {"answer": 42}},
         "structuredContent in meta.mcp")
    add(c, sid, "p1", "mcp__fake__slow", {"ms": 50, "steps": 3})
    got = [c.note("progress", lambda p: p["toolUseId"] == "p1")
           for _ in range(3)]
    T.eq([g["data"]["progress"] for g in got], [1, 2, 3],
         "progress in order")
    T.eq(got[0]["data"].get("total"), 3, "with its total")
    T.eq(got[0]["data"].get("message"), "step 1", "and its message")
    T.eq(text(result(c, "p1")), "slow done", "the slow call's result")
    # Roots: the session's cwd.
    add(c, sid, "r1", "mcp__fake__roots", {})
    T.check("file://" + AREA in text(result(c, "r1")),
            "roots/list gives the session's cwd")
    # A text over maxResultBytes: head and tail, the whole in a file (S17).
    add(c, sid, "b1", "mcp__fake__big", {"bytes": 300000})
    r = result(c, "b1")
    t = text(r)
    path = r["meta"].get("fullOutputPath")
    T.check(t.startswith("HEAD") and t.rstrip().endswith("TAIL") and
            len(t) < 200000 and path is not None,
            "a large result is bounded: %d bytes, %r" % (len(t), r["meta"]))
    if path is not None and os.path.exists(path):
        T.eq(os.path.getsize(path), 300000, "the whole text in its file")
    # An abort cancels a long call; the server serves on.
    # Its own length is far past the guard below: only the abort ends it.
    add(c, sid, "a1", "mcp__fake__slow", {"ms": 1000,
                                          "steps": int(pydaemon.scaled(60))})
    c.note("progress", lambda p: p["toolUseId"] == "a1")
    st = {t["id"]: t for t in c.ok("status", sessionId=sid)["tools"]}
    a1 = st.get("a1", {})
    T.eq((a1.get("runner"), a1.get("mcpServer"), a1.get("status")),
         ("mcp", "fake", "executing"), "status shows an MCP call: %r" % a1)
    t0 = time.monotonic()
    c.ok("abort", sessionId=sid, reason="interrupt")
    r = result(c, "a1")
    T.eq(r["meta"].get("reason"), "interrupted", "a read-only call is "
         "cancelled by an interrupt (S8)")
    T.check(time.monotonic() - t0 < pydaemon.scaled(30),
            "the abort ends it, not its end")
    c.ok("drain", sessionId=sid)
    add(c, sid, "e2", "mcp__fake__echo", {"text": "after"})
    T.eq(text(result(c, "e2")), "echo: after", "served after the abort")
    # A crash mid-call: an error result naming the exit and stderr.
    add(c, sid, "c1", "mcp__fake__crash", {})
    r = result(c, "c1")
    T.check(r["result"]["is_error"] and "exited with status 3" in text(r)
            and "crashing on purpose" in text(r),
            "a crash fails its call in words: %r" % text(r))
    ready(c, "fake")
    add(c, sid, "e3", "mcp__fake__echo", {"text": "restarted"})
    T.eq(text(result(c, "e3")), "echo: restarted", "served once restarted")
    fams = {f["name"]: f for f in c.ok("metrics")["metrics"]}
    calls = {s["labels"]["outcome"]: s["value"] for s in
             fams.get("stexec_mcp_calls_total", {}).get("samples", [])
             if s["labels"]["session"] == sid and
             s["labels"]["server"] == "fake"}
    T.eq(calls, {"ok": 7, "error": 0, "failed": 1, "cancelled": 1,
                 "timeout": 0}, "metrics count its calls by outcome")
    restarts = [s["value"] for s in
                fams.get("stexec_mcp_restarts_total", {}).get("samples", [])
                if s["labels"] == {"session": sid, "server": "fake"}]
    T.eq(restarts, [1], "metrics count its restarts")
    c.ok("closeSession", sessionId=sid)
    c.close()


def sampling(d):
    c, sid = session(d, mcpServers={"fake": fake()},
                     mcpAnswers=["sampling"])
    add(c, sid, "s1", "mcp__fake__sample", {})
    req = c.note("mcp_request")
    T.eq(req["method"], "sampling/createMessage", "the request's method")
    T.eq(req["server"], "fake", "its server")
    T.eq(req["params"]["maxTokens"], 10, "its params")
    c.ok("respondMcp", sessionId=sid, requestId=req["requestId"],
         result={"role": "assistant", "model": "test",
                 "content": {"type": "text", "text": "from the client"}})
    T.check("from the client" in text(result(c, "s1")),
            "the client's answer reaches the server")
    err = c.call("respondMcp", sessionId=sid, requestId=req["requestId"],
                 error="again")
    T.eq(err.get("error", {}).get("code"), -32602, "answered twice")
    c.ok("closeSession", sessionId=sid)
    c.close()
    # Without mcpAnswers, the server is told nobody answers.
    c, sid = session(d, mcpServers={"fake": fake()})
    add(c, sid, "s2", "mcp__fake__sample", {})
    T.check("no client of this session answers sampling" in
            text(result(c, "s2")), "unanswered sampling in words")
    c.ok("closeSession", sessionId=sid)
    c.close()


def failures(d):
    c, sid = session(d, mcpServers={"dead": fake("die-at-start")})
    add(c, sid, "f1", "mcp__dead__echo", {"text": "x"})
    r = result(c, "f1")
    T.check(r["result"]["is_error"] and "cannot start, on purpose" in
            text(r), "a failed server's call is an error result saying "
            "why: %r" % text(r))
    st = c.note("mcp_server", lambda p: p["state"] == "failed")
    T.check("exited with status 3" in st.get("why", ""),
            "failed, with why: %r" % st)
    ready(c, "op")
    cli = os.environ.get("STEXEC_CLI")
    if cli:
        # stexec-cli run of an MCP tool: its session starts the
        # operator's servers, and the call waits for its server.
        out = subprocess.run([cli, "--socket", d.sock, "run", "--cwd",
                              AREA, "mcp__op__echo", '{"text": "cli"}'],
                             capture_output=True, text=True, timeout=GUARD)
        T.check("echo: cli" in out.stdout, "stexec-cli run "
                "mcp__op__echo: %r %r" % (out.stdout, out.stderr[-300:]))
        # stexec-cli mcp re-exports the servers' tools to an MCP client.
        gw = subprocess.Popen([cli, "--socket", d.sock, "mcp", "--cwd",
                               AREA], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
        reqs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18",
                            "capabilities": {}, "clientInfo": {
                                "name": "test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "mcp__op__echo",
                            "arguments": {"text": "gateway"}}}]
        gw.stdin.write("".join(json.dumps(r) + "\n" for r in reqs))
        gw.stdin.flush()
        got, out = {}, ""
        while 3 not in got:
            line = gw.stdout.readline()
            if not line:
                break
            out += line
            msg = json.loads(line)
            got[msg.get("id")] = msg
        gw.stdin.close()
        gw.wait(timeout=GUARD)
        listed = {t["name"]: t for t in
                  got.get(2, {}).get("result", {}).get("tools", [])}
        T.eq(listed.get("mcp__op__echo", {}).get("annotations"),
             {"readOnlyHint": True}, "stexec-cli mcp lists the operator's "
             "server's tools with their annotations")
        T.eq(got.get(3, {}).get("result", {}).get("content", [{}])[0]
             .get("text"), "echo: gateway", "and calls them: %r" % out)
        out = subprocess.run([cli, "--socket", d.sock, "mcp-servers", sid],
                             capture_output=True, text=True, timeout=GUARD)
        rows = {line.split()[0]: line for line in
                out.stdout.splitlines()[1:]}
        T.check("failed" in rows.get("dead", "") and "on purpose" in
                rows.get("dead", ""), "stexec-cli mcp-servers shows the "
                "failed server and why: %r" % out.stdout)
        T.check(rows.get("op", "").split()[1:2] == ["ready"],
                "...and the operator's, ready: %r" % out.stdout)
    c.ok("closeSession", sessionId=sid)
    c.close()
    c = Peer(d.sock)
    cases = [
        ({"fs": {"command": "x", "args": ["a", 1]}},
         "mcpServers.fs.args[1]", "must be a string"),
        ({"r": {"type": "http", "command": "x"}},
         "mcpServers.r.type", "not run by the daemon"),
        ({"fs": {"command": "x", "scope": "daemon"}},
         "mcpServers.fs.scope", "operator"),
        ({"op": fake()}, "mcpServers.op", "already defines"),
    ]
    for servers, field, words in cases:
        e = c.call("createSession", _check=False, cwd=AREA,
                   mcpServers=servers)
        err = e.get("error", {})
        T.eq(err.get("code"), -32602, "%s: invalid params" % field)
        T.eq((err.get("data") or {}).get("field"), field, "the field named")
        T.check(words in err.get("message", ""), "%s: %r" % (field, err))
    c.close()


def mixed(d):
    """bash, an MCP read-only tool, an MCP write tool and read_file added
    as a message streams: the write runs alone, results come in order."""
    with open(os.path.join(AREA, "notes.txt"), "w") as f:
        f.write("a note\n")
    c, sid = session(d, mcpServers={"fake": fake()})
    ready(c, "fake")
    add(c, sid, "m1", "bash", {"command": "echo from bash"})
    add(c, sid, "m2", "mcp__fake__stamp", {"ms": 300})
    add(c, sid, "m3", "mcp__fake__write", {"ms": 100})
    add(c, sid, "m4", "read_file", {"file_path": os.path.join(AREA, "notes.txt")})
    got = [c.note("tool_result") for _ in range(4)]
    T.eq([g["toolUseId"] for g in got], ["m1", "m2", "m3", "m4"],
         "results in the message's order")
    texts = [text(g) for g in got]
    T.check("from bash" in texts[0], "bash ran: %r" % texts[0])
    T.check("a note" in texts[3], "read_file ran: %r" % texts[3])
    stamp = texts[1].split()
    write = texts[2].split()
    if T.check(stamp[0] == "stamp" and write[0] == "write",
               "the MCP tools ran: %r" % texts[1:3]):
        T.check(float(write[1]) >= float(stamp[2]),
                "the write tool ran alone, after the read-only one")
    c.ok("closeSession", sessionId=sid)
    c.close()


def sandboxed(d):
    """A server under workspace-write writes its cwd, not outside; the
    same server under none does: the sandbox is the server's."""
    outside = tempfile.mkdtemp(prefix="stexec-mcp-outside-")
    try:
        c, sid = session(d, mcpServers={
            "ws": fake(sandbox="workspace-write"),
            "open": fake(sandbox="none")})
        ready(c, "ws")
        ready(c, "open")
        add(c, sid, "w1", "mcp__ws__touch",
            {"path": os.path.join(AREA, "inside.txt")})
        T.check(text(result(c, "w1")).startswith("wrote"),
                "workspace-write: it writes the session's cwd")
        add(c, sid, "w2", "mcp__ws__touch",
            {"path": os.path.join(outside, "x.txt")})
        r = result(c, "w2")
        T.check(r["result"]["is_error"] and "cannot write" in text(r) and
                not os.path.exists(os.path.join(outside, "x.txt")),
                "workspace-write: not outside it: %r" % text(r))
        add(c, sid, "w3", "mcp__open__touch",
            {"path": os.path.join(outside, "y.txt")})
        T.check(text(result(c, "w3")).startswith("wrote") and
                os.path.exists(os.path.join(outside, "y.txt")),
                "none: the same server writes there")
        c.ok("closeSession", sessionId=sid)
        c.close()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def network(d):
    """A server under network rules reaches the names allowed, through
    the daemon's proxy, and no other host; the same server without rules
    is not stopped by it."""
    if os.geteuid() != 0:
        print("network rules for a server: not run (network namespaces "
              "need root here)")
        return
    c, sid = session(d, mcpServers={
        "net": fake(sandbox={"mode": "workspace-write",
                             "network": {"allow": ["allowed.invalid"]}}),
        "open": fake(sandbox="none")})
    ready(c, "net")
    ready(c, "open")
    add(c, sid, "n1", "mcp__net__fetch", {"url": "http://denied.invalid/"})
    t = text(result(c, "n1"))
    T.check("403" in t and "denied.invalid:80 is not allowed" in t,
            "another host is refused by name: %r" % t)
    add(c, sid, "n2", "mcp__net__fetch", {"url": "http://1.1.1.1/"})
    t = text(result(c, "n2"))
    T.check("403" in t and "1.1.1.1:80 is not allowed" in t,
            "an address is refused: %r" % t)
    add(c, sid, "n3", "mcp__net__fetch", {"url": "http://allowed.invalid/"})
    t = text(result(c, "n3"))
    T.check("cannot resolve allowed.invalid" in t and "not allowed" not in t,
            "the allowed name passes the rules (and fails to resolve, "
            "being .invalid): %r" % t)
    add(c, sid, "n4", "mcp__open__fetch", {"url": "http://denied.invalid/"})
    t = text(result(c, "n4"))
    T.check("is not allowed" not in t and "stexec:" not in t,
            "without rules, no proxy stands in its way: %r" % t)
    c.ok("closeSession", sessionId=sid)
    c.close()


def server_pid(c, sid, name):
    lt = c.ok("listTools", sessionId=sid)
    return {s["name"]: s for s in lt["mcpServers"]}.get(name, {}).get("pid")


def reload(d):
    """A live reload hands the session's servers over (doc/design.md §7,
    Reload): the same process, no second initialize, and a call in flight
    delivers the server's real answer, once; a call handed over is still
    cancelled by an abort. The operator's server goes on the same way."""
    c, sid = session(d, mcpServers={"fake": fake()})
    ready(c, "fake")
    ready(c, "op")
    pid, op_pid = server_pid(c, sid, "fake"), server_pid(c, sid, "op")
    add(c, sid, "l1", "mcp__fake__slow", {"ms": 100, "steps": 30})
    c.note("progress", lambda p: p["toolUseId"] == "l1")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    T.eq(server_pid(c, sid, "fake"), pid,
         "the session's server is handed over: the same process")
    T.eq(server_pid(c, sid, "op"), op_pid, "and the operator's")
    r = result(c, "l1")
    T.eq(text(r), "slow done",
         "a call in flight across a reload delivers the server's answer: %r"
         % text(r))
    add(c, sid, "l2", "mcp__fake__echo", {"text": "reloaded"})
    T.eq(text(result(c, "l2")), "echo: reloaded",
         "its server serves after the reload")
    add(c, sid, "l3", "mcp__op__echo", {"text": "op"})
    T.eq(text(result(c, "l3")), "echo: op", "and the operator's")
    T.check(sum(1 for n in c.notes if n.get("method") == "tool_result" and
                n["params"]["toolUseId"] == "l1") <= 1,
            "the call in flight got one result")
    # A call handed over is still the server's to cancel.
    add(c, sid, "l4", "mcp__fake__slow", {"ms": 100, "steps": 100000})
    c.note("progress", lambda p: p["toolUseId"] == "l4")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    T.eq(c.ok("status", sessionId=sid)["tools"][-1].get("status"),
         "executing", "the handed-over call runs on")
    c.ok("abort", sessionId=sid, reason="interrupt")
    r = result(c, "l4")
    T.eq(r["meta"].get("reason"), "interrupted",
         "an abort after the reload cancels the handed-over call "
         "(not daemon_restarted): %r" % text(r))
    c.ok("drain", sessionId=sid)
    add(c, sid, "l5", "mcp__fake__echo", {"text": "after"})
    T.eq(text(result(c, "l5")), "echo: after",
         "the server serves its next call")
    T.eq(server_pid(c, sid, "fake"), pid, "in the same process still")
    c.ok("closeSession", sessionId=sid)
    c.close()
    if os.geteuid() != 0:
        print("a server's network rules across a reload: not run (network "
              "namespaces need root here)")
        return
    # A server under network rules goes on with its proxy: the same rules.
    c, sid = session(d, mcpServers={
        "net": fake(sandbox={"mode": "workspace-write",
                             "network": {"allow": ["allowed.invalid"]}})})
    ready(c, "net")
    pid = server_pid(c, sid, "net")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    T.eq(server_pid(c, sid, "net"), pid,
         "a server with network rules is handed over too")
    add(c, sid, "n1", "mcp__net__fetch", {"url": "http://denied.invalid/"})
    t = text(result(c, "n1"))
    T.check("403" in t and "denied.invalid:80 is not allowed" in t,
            "after the reload its proxy still refuses another host: %r" % t)
    add(c, sid, "n2", "mcp__net__fetch", {"url": "http://allowed.invalid/"})
    t = text(result(c, "n2"))
    T.check("cannot resolve allowed.invalid" in t and "not allowed" not in t,
            "and passes the allowed name: %r" % t)
    c.ok("closeSession", sessionId=sid)
    c.close()


def waited(what, cond):
    """cond() once true (one generous guard against a hang)."""
    guard = time.monotonic() + GUARD
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > guard:
            raise AssertionError("never came: " + what)
        time.sleep(0.02)


def logged(path):
    try:
        with open(path) as f:
            return f.read().split("\n")
    except OSError:
        return []


def reloaded(c, d):
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)


def reload_counted(d):
    """What the server itself sees of a reload (its MCP_FAKE_LOG): no
    second initialize or tools/call, and a cancel after the reload. The
    calls wait on a file (gate), so they are in flight across the reload
    by construction, not by timing."""
    log = os.path.join(AREA, "reload.log")
    gate1 = os.path.join(AREA, "gate1")
    c, sid = session(d, mcpServers={"fake": fake(env={"MCP_FAKE_LOG": log})})
    ready(c, "fake")
    pid = server_pid(c, sid, "fake")
    add(c, sid, "g1", "mcp__fake__gate", {"path": gate1})
    add(c, sid, "g2", "mcp__fake__gate",
        {"path": os.path.join(AREA, "never")})
    c.note("progress", lambda p: p["toolUseId"] == "g1")
    c.note("progress", lambda p: p["toolUseId"] == "g2")
    reloaded(c, d)
    T.eq(server_pid(c, sid, "fake"), pid, "the same server process")
    with open(gate1, "w"):
        pass
    r = result(c, "g1")
    T.eq((text(r), r["meta"].get("reason")), ("gate opened", "ok"),
         "a call surely in flight at the reload: the server's own answer")
    c.ok("abort", sessionId=sid, reason="interrupt")
    T.eq(result(c, "g2")["meta"].get("reason"), "interrupted",
         "an abort after the reload ends the handed-over call")
    rid = [ln.split()[1] for ln in logged(log)
           if ln.startswith("call ") and ln.endswith(" gate")][-1:]
    waited("the server hears the cancel", lambda: any(
        ln == "cancelled " + rid[0] for ln in logged(log)) if rid else False)
    c.ok("drain", sessionId=sid)
    # Ready and idle: handed over again; a new call works.
    reloaded(c, d)
    T.eq(server_pid(c, sid, "fake"), pid, "an idle server is handed over")
    add(c, sid, "g3", "mcp__fake__echo", {"text": "idle"})
    T.eq(text(result(c, "g3")), "echo: idle", "and serves a new call")
    T.eq(len([ln for ln in logged(log) if ln.startswith("initialize ")]), 1,
         "no second initialize across two reloads")
    T.eq(len([ln for ln in logged(log) if ln.startswith("call ") and
              ln.endswith(" gate")]), 2, "no second tools/call")
    T.eq([n["params"]["toolUseId"] for n in c.notes
          if n.get("method") == "tool_result" and
          n["params"]["toolUseId"] in ("g1", "g2")], [],
         "each call in flight got one result")
    c.ok("closeSession", sessionId=sid)
    c.close()


def reload_starting(d):
    """A server mid-handshake at a reload is not handed over: its process
    is killed and the new image starts it afresh."""
    log = os.path.join(AREA, "starting.log")
    c, sid = session(d, mcpServers={"hung": fake(
        "hang-init", env={"MCP_FAKE_LOG": log})})
    waited("its initialize", lambda: any(
        ln.startswith("initialize ") for ln in logged(log)))
    old = int([ln for ln in logged(log) if ln.startswith("initialize ")][0]
              .split()[1])
    T.eq(server_pid(c, sid, "hung"), old, "it is starting")
    reloaded(c, d)
    waited("a second initialize", lambda: len(
        [ln for ln in logged(log) if ln.startswith("initialize ")]) == 2)
    new = int([ln for ln in logged(log) if ln.startswith("initialize ")][1]
              .split()[1])
    T.check(new != old, "started afresh in the new image")
    T.eq(server_pid(c, sid, "hung"), new, "listTools shows the new one")

    def gone():
        try:
            with open("/proc/%d/stat" % old) as f:
                return f.read().split(")")[-1].split()[0] == "Z"
        except OSError:
            return True
    waited("the old process gone", gone)
    c.ok("closeSession", sessionId=sid)
    c.close()


def crash(d):
    """SIGKILL of the daemon leaves no server process; the next daemon
    gives the call in flight daemon_restarted and starts the session's
    servers afresh."""
    c, sid = session(d, mcpServers={"fake": fake()})
    ready(c, "fake")
    add(c, sid, "k1", "mcp__fake__slow", {"ms": 1000, "steps": 60})
    c.note("progress", lambda p: p["toolUseId"] == "k1")
    c.close()
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    guard = time.monotonic() + GUARD
    while d.leftovers() and time.monotonic() < guard:
        time.sleep(0.05)
    T.eq(d.leftovers(), [], "SIGKILL of the daemon leaves no server")
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
    c.ok("subscribe", sessionId=sid)
    c.ok("drain", sessionId=sid)
    got = [n["params"] for n in c.ok("events", sessionId=sid)["notifications"]
           if n["method"] == "tool_result"]
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in got
          if r["toolUseId"] == "k1"], [("k1", "daemon_restarted")],
         "after a crash, the call in flight gets daemon_restarted (S10)")
    add(c, sid, "k2", "mcp__fake__echo", {"text": "again"})
    T.eq(text(result(c, "k2")), "echo: again",
         "the session's own server runs again after a crash")
    c.ok("closeSession", sessionId=sid)
    c.close()


def body(d):
    deadline = time.monotonic() + GUARD
    while not os.path.exists(d.sock):
        if time.monotonic() > deadline or d.proc.poll() is not None:
            raise AssertionError("the daemon did not start")
        time.sleep(0.05)
    listing(d)
    calls(d)
    sampling(d)
    failures(d)
    mixed(d)
    sandboxed(d)
    network(d)
    reload(d)
    reload_counted(d)
    reload_starting(d)
    crash(d)
    # Closed sessions' servers end (stdin, TERM, KILL): wait for it.
    deadline = time.monotonic() + GUARD
    while d.leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    with open(CONF, "w") as f:
        json.dump({"mcpServers": {"op": fake()}}, f)
    try:
        return pydaemon.run(T, body, args=["--mcp-config", CONF])
    finally:
        shutil.rmtree(AREA, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
