#!/usr/bin/env python3
"""
MCP servers of scope "daemon" (doc/design.md §7, Shared MCP servers)
against the real stexecd and tests/mcp_fake_server.py: one process for
every session, calls of two sessions at once on its pipe, an abort in one
that leaves the other's call alone, roots that are its own cwd, a
sampling request routed to the one session with a call in flight (and
refused in words when two are), a crash that fails every session's call
in flight, its row in the metrics top reads, closing
every session leaves it running, the daemon's stop leaves nothing. Also
the start timeout: a server's startTimeoutMs, else --mcp-start-timeout-ms;
a shared server's sandbox and network rules, its config's; and a reload
that hands it over with the calls of two sessions in flight.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_mcp_shared.py
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
from mcp_peer import GUARD, add, ready, result, text  # noqa: E402
from peer import new_image  # noqa: E402

T = Checks()
FAKE = os.path.join(HERE, "mcp_fake_server.py")
AREA = tempfile.mkdtemp(prefix="stexec-mcp-shared-")
CONF = os.path.join(AREA, "operator.mcp.json")
START_MS = int(pydaemon.scaled(2) * 1000)


def fake(*modes, **extra):
    srv = {"type": "stdio", "command": "python3", "args": [FAKE] + list(modes)}
    srv.update(extra)
    return srv


def alive(pid):
    """Whether pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


def pgid(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[2])


def state(c, sid, name):
    return {s["name"]: s for s in
            c.ok("listTools", sessionId=sid)["mcpServers"]}.get(name, {})


def samples(c, family):
    for f in c.ok("metrics")["metrics"]:
        if f["name"] == family:
            return f["samples"]
    return []


def shared(d):
    c1, s1 = mcp_peer.session(d, AREA)
    c2, s2 = mcp_peer.session(d, AREA, mcpAnswers=["sampling"])
    ready(c1, "shared")
    ready(c2, "shared")
    st1, st2 = state(c1, s1, "shared"), state(c2, s2, "shared")
    T.eq((st1.get("scope"), st2.get("scope")), ("daemon", "daemon"),
         "listTools shows scope daemon in each session")
    pid = st1.get("pid")
    T.check(pid is not None and st2.get("pid") == pid,
            "one process for both sessions: %r %r" % (st1, st2))
    T.eq(st2.get("state"), "ready", "it is ready")
    tools = {t["name"] for t in c2.ok("listTools", sessionId=s2)["tools"]}
    T.check("mcp__shared__echo" in tools, "its tools are each session's")

    # Its roots are its own cwd (a directory under the state directory),
    # no session's.
    add(c1, s1, "r1", "mcp__shared__roots", {})
    t = text(result(c1, "r1"))
    T.check("mcp-shared" in t and AREA not in t,
            "roots/list answers the shared server's cwd: %r" % t)

    # Two sessions' calls on its one pipe at once; an abort in one leaves
    # the other's call alone. Their lengths are far past the abort.
    add(c1, s1, "a1", "mcp__shared__slow",
        {"ms": 1000, "steps": int(pydaemon.scaled(60))})
    add(c2, s2, "b1", "mcp__shared__slow",
        {"ms": 100, "steps": int(pydaemon.scaled(100))})
    c1.note("progress", lambda p: p["toolUseId"] == "a1")
    c2.note("progress", lambda p: p["toolUseId"] == "b1")
    inflight = {s["labels"]["session"]: s["value"] for s in
                samples(c1, "stexec_mcp_calls_in_flight")
                if s["labels"]["server"] == "shared"}
    T.eq(inflight.get("daemon"), 2, "two calls in flight on it, one row "
         "for the shared server: %r" % inflight)
    rows = [s for s in samples(c1, "stexec_mcp_server")
            if s["labels"]["server"] == "shared"]
    T.eq([(r["labels"]["session"], r["labels"]["scope"], r["value"])
          for r in rows], [("daemon", "daemon", pid)],
         "its one row for top: session daemon, its pid")

    c1.ok("abort", sessionId=s1, reason="interrupt")
    r = result(c1, "a1")
    T.eq(r["meta"].get("reason"), "interrupted", "the abort ends a1")
    c2.notes = [n for n in c2.notes if n.get("method") != "progress"]
    c2.note("progress", lambda p: p["toolUseId"] == "b1")
    T.check(not any(n.get("method") == "tool_result" and
                    n["params"]["toolUseId"] == "b1" for n in c2.notes),
            "the other session's call goes on after the abort")
    T.eq(text(result(c2, "b1")), "slow done",
         "and it ends as it would have")
    c1.ok("drain", sessionId=s1)

    # A sampling request while another session's call is in flight too:
    # refused in words.
    add(c1, s1, "a2", "mcp__shared__slow",
        {"ms": 1000, "steps": int(pydaemon.scaled(60))})
    c1.note("progress", lambda p: p["toolUseId"] == "a2")
    add(c2, s2, "x1", "mcp__shared__sample", {})
    t = text(result(c2, "x1"))
    T.check("2 calls are in flight" in t and "shared" in t,
            "sampling with several calls in flight is refused: %r" % t)
    c1.ok("abort", sessionId=s1, reason="interrupt")
    T.eq(result(c1, "a2")["meta"].get("reason"), "interrupted",
         "the abort ends a2")
    c1.ok("drain", sessionId=s1)

    # With one call in flight, its session's client is asked.
    add(c2, s2, "x2", "mcp__shared__sample", {})
    req = c2.note("mcp_request")
    T.eq((req["server"], req["method"]), ("shared",
         "sampling/createMessage"), "routed to the one session calling")
    c2.ok("respondMcp", sessionId=s2, requestId=req["requestId"],
          result={"role": "assistant", "model": "test",
                  "content": {"type": "text", "text": "from session 2"}})
    T.check("from session 2" in text(result(c2, "x2")),
            "the answer reaches the shared server")
    T.check(not any(n.get("method") == "mcp_request" for n in c1.notes),
            "the other session was not asked")

    # A crash fails the calls in flight of every session, with why; it
    # restarts, and every session sees it ready again.
    add(c1, s1, "a3", "mcp__shared__slow",
        {"ms": 1000, "steps": int(pydaemon.scaled(60))})
    c1.note("progress", lambda p: p["toolUseId"] == "a3")
    add(c2, s2, "k1", "mcp__shared__crash", {})
    for c, tid in ((c1, "a3"), (c2, "k1")):
        r = result(c, tid)
        T.check(r["result"]["is_error"] and "exited with status 3" in
                text(r) and "crashing on purpose" in text(r),
                "%s fails with the crash in words: %r" % (tid, text(r)))
    for c in (c1, c2):
        c.note("mcp_server", lambda p: p["name"] == "shared" and
               p["state"] == "restarting")
        ready(c, "shared")
    restarts = [s["value"] for s in samples(c1, "stexec_mcp_restarts_total")
                if s["labels"] == {"session": "daemon", "server": "shared"}]
    T.eq(restarts, [1], "its restart is counted once, session daemon")
    pid = state(c1, s1, "shared").get("pid")
    T.check(pid is not None and state(c2, s2, "shared").get("pid") == pid,
            "one new process for both")

    done = {s["labels"]["session"]: s["value"] for s in
            samples(c1, "stexec_mcp_calls_done_total")
            if s["labels"]["server"] == "shared"}
    T.check(done.get("daemon", 0) >= 5, "calls done, all sessions': %r"
            % done)
    cli = os.environ.get("STEXEC_CLI")
    if cli:
        out = subprocess.run([cli, "--socket", d.sock, "top", "--once"],
                             capture_output=True, text=True, timeout=GUARD)
        line = [ln for ln in out.stdout.splitlines()
                if ln.split()[:2] == ["daemon", "shared"]]
        T.check(len(line) == 1 and "ready" in line[0] and str(pid) in
                line[0], "stexec-cli top shows the shared server's row: "
                "%r" % out.stdout[-800:])
        out = subprocess.run([cli, "--socket", d.sock, "mcp-servers", s1],
                             capture_output=True, text=True, timeout=GUARD)
        rows = {ln.split()[0]: ln.split() for ln in
                out.stdout.splitlines()[1:]}
        T.eq(rows.get("shared", [])[1:3], ["ready", "daemon"],
             "stexec-cli mcp-servers shows it ready, scope daemon: %r" %
             out.stdout)

    c1.ok("closeSession", sessionId=s1)
    c2.ok("closeSession", sessionId=s2)
    c1.close()
    c2.close()
    T.check(pid is not None and alive(pid), "closing every session leaves "
            "the shared server running")
    c3, s3 = mcp_peer.session(d, AREA)
    ready(c3, "shared")
    add(c3, s3, "e1", "mcp__shared__echo", {"text": "later"})
    T.eq(text(result(c3, "e1")), "echo: later", "a later session uses it")
    T.eq(state(c3, s3, "shared").get("pid"), pid, "the same process")
    c3.ok("closeSession", sessionId=s3)
    c3.close()
    return pid


def sandboxed(d):
    """A shared server's sandbox is its config's, not the session's: under
    workspace-write it writes its own cwd (STATE_DIR/mcp-ws) and not the
    session's, even for a session whose own sandbox is none; its network
    rules hold it to the names allowed, through a proxy of its own."""
    caps = mcp_peer.Peer(d.sock)
    sb = caps.ok("initialize")["capabilities"].get("enforcement", {}).get(
        "sandbox", {})
    caps.close()
    if "workspace-write" not in sb.get("profiles", []):
        print("a shared server's sandbox: not run (this host cannot "
              "sandbox: %r)" % sb.get("whyNot"))
        return
    c, sid = mcp_peer.session(d, AREA, sandbox="none")
    ready(c, "ws")
    own = os.path.join(d.tmp, "state", "mcp-ws", "mine.txt")
    add(c, sid, "w1", "mcp__ws__touch", {"path": own})
    T.check(text(result(c, "w1")).startswith("wrote") and
            os.path.exists(own), "workspace-write: it writes its own cwd")
    add(c, sid, "w2", "mcp__ws__touch",
        {"path": os.path.join(AREA, "not-here.txt")})
    r = result(c, "w2")
    T.check(r["result"]["is_error"] and "cannot write" in text(r) and
            not os.path.exists(os.path.join(AREA, "not-here.txt")),
            "not the session's cwd, the session's sandbox being none: %r"
            % text(r))
    if sb.get("networkRules"):
        add(c, sid, "n1", "mcp__ws__fetch", {"url": "http://denied.invalid/"})
        t = text(result(c, "n1"))
        T.check("403" in t and "denied.invalid:80 is not allowed" in t,
                "its network rules refuse another host: %r" % t)
        add(c, sid, "n2", "mcp__ws__fetch",
            {"url": "http://allowed.invalid/"})
        t = text(result(c, "n2"))
        T.check("cannot resolve allowed.invalid" in t and "not allowed" not
                in t, "and pass the name allowed: %r" % t)
    else:
        print("a shared server's network rules: not run (%r)" %
              (sb.get("whyNot") or {}).get("networkRules"))
    c.ok("closeSession", sessionId=sid)
    c.close()


def reloaded(d, pid):
    """A live reload hands a shared server over (doc/design.md §7, Reload):
    the same processes (one with network rules, its proxy with it), and
    the calls two sessions had in flight each deliver the server's own
    answer, once."""
    c, sid = mcp_peer.session(d, AREA)
    ready(c, "shared")
    ready(c, "ws")
    ws = state(c, sid, "ws").get("pid")
    c2, sid2 = mcp_peer.session(d, AREA)
    add(c, sid, "r1", "mcp__shared__slow", {"ms": 100, "steps": 20})
    add(c2, sid2, "r2", "mcp__shared__slow", {"ms": 100, "steps": 25})
    c.note("progress", lambda p: p["toolUseId"] == "r1")
    c2.note("progress", lambda p: p["toolUseId"] == "r2")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, before)
    T.eq(state(c, sid, "shared").get("pid"), pid,
         "the shared server is handed over: the same process")
    T.eq(state(c, sid, "ws").get("pid"), ws,
         "and the one with network rules, with its proxy")
    T.eq(text(result(c, "r1")), "slow done",
         "one session's call in flight delivers the server's answer")
    T.eq(text(result(c2, "r2")), "slow done", "and the other's")
    for conn, tid in ((c, "r1"), (c2, "r2")):
        T.check(not any(n.get("method") == "tool_result" and
                        n["params"]["toolUseId"] == tid for n in conn.notes),
                "%s got one result" % tid)
    add(c, sid, "r3", "mcp__shared__echo", {"text": "reloaded"})
    T.eq(text(result(c, "r3")), "echo: reloaded",
         "the shared server serves after the reload")
    add(c, sid, "r4", "mcp__ws__fetch", {"url": "http://denied.invalid/"})
    t = text(result(c, "r4"))
    sb = c.ok("initialize")["capabilities"].get("enforcement", {}).get(
        "sandbox", {})
    if sb.get("networkRules"):
        T.check("denied.invalid:80 is not allowed" in t,
                "its proxy still refuses another host: %r" % t)
    else:
        print("a shared server's proxy across a reload: not run (%r)" %
              (sb.get("whyNot") or {}).get("networkRules"))
    for conn, s_id in ((c, sid), (c2, sid2)):
        conn.ok("closeSession", sessionId=s_id)
        conn.close()
    return pid


def start_timeout(d):
    c, sid = mcp_peer.session(d, AREA, mcpServers={
        "own": fake("hang-init", startTimeoutMs=int(pydaemon.scaled(1) *
                                                     1000)),
        "dflt": fake("hang-init")})
    add(c, sid, "t1", "mcp__own__echo", {"text": "x"})
    add(c, sid, "t2", "mcp__dflt__echo", {"text": "x"})
    t1, t2 = text(result(c, "t1")), text(result(c, "t2"))
    T.check("not ready after %d ms" % int(pydaemon.scaled(1) * 1000) in t1,
            "startTimeoutMs bounds the wait: %r" % t1)
    T.check("not ready after %d ms" % START_MS in t2,
            "--mcp-start-timeout-ms bounds it otherwise: %r" % t2)
    c.ok("closeSession", sessionId=sid)
    c.close()


def main():
    path = os.environ.get("STEXEC_DAEMON")
    if not path:
        print("STEXEC_DAEMON is not set: skipped")
        return 77
    with open(CONF, "w") as f:
        json.dump({"mcpServers": {
            "shared": fake(scope="daemon"),
            # Past its closed stdin its process lives on (a sleep): only
            # a kill ends it.
            "ws": {"command": "sh", "args": [
                "-c", 'python3 "$0"; exec sleep 1000', FAKE],
                "scope": "daemon", "sandbox": {
                    "mode": "workspace-write",
                    "network": {"allow": ["allowed.invalid"]}}}}}, f)
    d = pydaemon.Daemon(path, ["--mcp-config", CONF,
                               "--mcp-start-timeout-ms", str(START_MS)])
    d.start()
    pid = None
    try:
        try:
            deadline = time.monotonic() + GUARD
            while not os.path.exists(d.sock):
                if time.monotonic() > deadline or d.proc.poll() is not None:
                    raise AssertionError("the daemon did not start")
                time.sleep(0.05)
            pid = shared(d)
            start_timeout(d)
            sandboxed(d)
            pid = reloaded(d, pid)
            probe = mcp_peer.Peer(d.sock)
            groups = {s["value"] for s in samples(probe, "stexec_mcp_server")
                      if s["labels"]["session"] == "daemon"}
            probe.close()
            guard = time.monotonic() + GUARD
            while ({pgid(p) for p in d.leftovers()} != groups and
                   time.monotonic() < guard):
                time.sleep(0.05)
            left = d.leftovers()
            T.check(pid in left and len(groups) == 2 and
                    {pgid(p) for p in left} == groups, "only the shared "
                    "servers' processes run once every session closed: "
                    "%r, groups %r" % (left, groups))
            # The daemon stops with a session's call in flight on it.
            c4, s4 = mcp_peer.session(d, AREA)
            add(c4, s4, "z1", "mcp__shared__slow",
                {"ms": 1000, "steps": int(pydaemon.scaled(60))})
            c4.note("progress", lambda p: p["toolUseId"] == "z1")
        except Exception:
            import traceback
            T.check(False, "raised:\n" + traceback.format_exc())
        rc = d.stop()
        T.eq(rc, 0, "the daemon's exit status after SIGTERM")
        T.eq(d.leftovers(), [], "the daemon's stop, a call in flight, "
             "leaves no process")
        T.check(pid is None or not alive(pid), "the shared server ended")
        T.check("did not end" not in d.log_tail(100), "it ended on its "
                "closed stdin, within the grace periods (S18)")
    finally:
        if T.failed:
            print("daemon log (tail):\n" + d.log_tail(), file=sys.stderr)
        shutil.rmtree(d.tmp, ignore_errors=True)
        shutil.rmtree(AREA, ignore_errors=True)
    print("%d passed, %d failed" % (T.passed, T.failed))
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
