#!/usr/bin/env python3
"""
Jobs against the real stexecd (doc/design.md §7, Jobs; PROTOCOL.md §4,
Jobs): a real HTTP server run in the background and fetched by a later
tool, readJob with since, waitMs and filter, a real bc under a real
terminal driven by writeJob, writeStdin, the errors, and closeSession
leaving nothing behind. Raw JSON-RPC, so that it tests the daemon, not a
client.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_jobs.py
"""
import json
import os
import re
import shutil
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pydaemon  # noqa: E402
from pydaemon import Checks, Conn, turn  # noqa: E402

T = Checks()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def output_until(c, sid, jid, want, limit=60):
    """The job's whole output once it holds want: each readJob waits from
    where the last stopped (since 0 would answer at once, a busy loop that
    gives up after a guessed time); limit is only a backstop."""
    text, since = "", 0
    deadline = time.monotonic() + pydaemon.scaled(limit)
    while want not in text and time.monotonic() < deadline:
        r = c.ok("readJob", sessionId=sid, jobId=jid, since=since,
                 waitMs=5000)
        text += r["text"]
        since = r["next"]
        if r["status"] != "running":
            break
    return text


def job_of(c, sid, jid):
    for j in c.ok("listJobs", sessionId=sid)["jobs"]:
        if j["jobId"] == jid:
            return j
    return None


def dev_server(d):
    """The issue's "done when": a server in the background, a later
    tool fetches a page, bash_output shows the request, kill_shell ends
    it, listJobs says killed."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    sub = Conn(d.sock)
    sub.ok("subscribe", sessionId=sid)
    port = free_port()
    t0 = time.monotonic()
    (res, meta), = turn(c, sid, ("bash", {
        "command": "exec python3 -u -m http.server %d --bind 127.0.0.1"
        % port, "run_in_background": True}))
    T.check(time.monotonic() - t0 < pydaemon.scaled(2),
            "the job's result comes at once")
    T.eq(meta["reason"], "background", "meta.reason")
    T.eq(res["is_error"], False, "a job's result is no error")
    jid = meta["job"]["jobId"]
    T.eq(jid, "j-1", "the first job's id")
    T.check("bash_output" in res["content"], "the content says how to "
            "read it: " + res["content"])
    T.eq(job_of(c, sid, jid)["status"], "running", "listJobs: running")
    # The server may take a moment to listen: a later turn fetches.
    page = ""
    for _ in range(50):
        (res, meta), = turn(c, sid, ("bash", {
            "command": "curl -s http://127.0.0.1:%d/ || true" % port}))
        page = res["content"]
        if "Directory listing" in page:
            break
        time.sleep(0.1)
    T.check("Directory listing" in page, "a later tool gets the page")
    log = ""
    for _ in range(50):
        (res, meta), = turn(c, sid, ("bash_output", {"bash_id": jid}))
        log += res["content"]
        if "GET / " in log:
            break
        time.sleep(0.1)
    T.check("GET / " in log, "bash_output shows the request log: " + log)
    T.check("running" in res["content"], "bash_output says it runs")
    (res, meta), = turn(c, sid, ("kill_shell", {"shell_id": jid}))
    T.eq(res["is_error"], False, "kill_shell: " + res["content"])
    j = job_of(c, sid, jid)
    T.eq(j["status"], "killed", "listJobs: killed after kill_shell")
    T.eq(j["pid"], None, "no pid once dead")
    # A subscriber saw it all live (the log keeps only recent turns).
    sub.s.settimeout(pydaemon.scaled(10))
    events = []
    while not any(n.get("method") == "job_exit" for n in events):
        events.append(json.loads(sub.f.readline()))
    T.check(any(n.get("method") == "job_output" and "GET / " in
                n["params"]["text"] for n in events),
            "job_output carried the request log")
    T.eq(events[-1]["params"]["reason"], "killed", "job_exit says killed")
    sub.close()
    (res, meta), = turn(c, sid, ("kill_shell", {"shell_id": jid}))
    T.eq(res["is_error"], True, "kill_shell of an ended job is an error")
    (res, meta), = turn(c, sid, ("bash_output", {"bash_id": "j-9"}))
    T.check(res["is_error"] and "no job j-9" in res["content"],
            "bash_output of no such job: " + res["content"])
    c.ok("closeSession", sessionId=sid)
    c.close()


def read_job(d):
    """readJob: since, the session's cursor, waitMs, filter, a
    reconnecting client, and the errors."""
    c = Conn(d.sock)
    tools = [{"name": "gen", "command": ["/bin/sh", "-c",
              "echo one; echo two; echo three; sleep 1; echo four; "
              "cat >/dev/null; echo fin"], "background": True}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    (res, meta), = turn(c, sid, ("gen", {}))
    jid = meta["job"]["jobId"]
    r = c.ok("readJob", sessionId=sid, jobId=jid, since=0)
    T.check("one\n".startswith(r["text"][:4]), "readJob from 0: %r" % r)
    T.eq(r["offset"], 0, "offset")
    T.eq(r["status"], "running", "status while it runs")
    # Nothing new yet: waitMs holds the answer until "four" comes.
    t0 = time.monotonic()
    r2 = c.ok("readJob", sessionId=sid, jobId=jid, waitMs=5000)
    while ("four" not in r2["text"] and
           time.monotonic() - t0 < pydaemon.scaled(5)):
        r2 = c.ok("readJob", sessionId=sid, jobId=jid, waitMs=5000)
    T.check("four" in r2["text"], "waitMs brings the later output")
    T.check(time.monotonic() - t0 > 0.3, "the answer waited for it")
    # since re-reads; filter keeps matching lines; next moves on.
    r3 = c.ok("readJob", sessionId=sid, jobId=jid, since=0, filter="^t")
    T.eq(r3["text"], "two\nthree\n", "filter keeps the lines matching")
    T.check(r3["next"] >= len("one\ntwo\nthree\n"), "next moves past")
    r4 = c.ok("readJob", sessionId=sid, jobId=jid, since=4, maxBytes=3)
    T.eq((r4["text"], r4["offset"], r4["next"]), ("two", 4, 7),
         "since and maxBytes")
    # Another connection (a client that reconnected) reads by since.
    c2 = Conn(d.sock)
    r5 = c2.ok("readJob", sessionId=sid, jobId=jid, since=0)
    T.check(r5["text"].startswith("one\ntwo\nthree\nfour\n"),
            "a new connection reads from since 0")
    # stdin stays open for a job: eof lets it finish.
    T.eq(c2.ok("writeJob", sessionId=sid, jobId=jid, data="x\n",
               eof=True), {"written": 2}, "writeJob")
    for _ in range(100):
        if job_of(c2, sid, jid)["status"] != "running":
            break
        time.sleep(0.05)
    j = job_of(c2, sid, jid)
    T.eq((j["status"], j["exitCode"], j["reason"]), ("exited", 0, "ok"),
         "the job exits once its stdin is closed")
    r6 = c2.ok("readJob", sessionId=sid, jobId=jid, since=0)
    T.check(r6["text"].endswith("fin\n"), "the end is read: %r" % r6)
    e = c2.call("writeJob", sessionId=sid, jobId=jid, data="y")
    T.eq(e.get("error", {}).get("code"), -32005, "writeJob after its end")
    e = c2.call("readJob", sessionId=sid, jobId="j-42")
    T.eq(e.get("error", {}).get("data"), {"field": "jobId"},
         "an unknown job id names the field")
    # A costly filter over a lot of output stops early: next says where.
    (res, meta), = turn(c2, sid, ("bash", {
        "command": "yes | head -n 300000; sleep 30",
        "run_in_background": True, "yield_ms": 1000}))
    big = meta["job"]["jobId"]
    costly = "^(" + "|".join("x%d" % i for i in range(60)) + "|y)$"
    t0 = time.monotonic()
    r7 = c2.ok("readJob", sessionId=sid, jobId=big, since=0,
               maxBytes=4194304, filter=costly)
    T.check(time.monotonic() - t0 < pydaemon.scaled(1),
            "a costly filter answers at once")
    T.check(0 < r7["next"] < 600000 and r7["text"].startswith("y\ny\n"),
            "it stops early, next says where: %r" % r7["next"])
    T.eq(len(r7["text"]), r7["next"], "every line looked at matched")
    c2.ok("signalJob", sessionId=sid, jobId=big, signal="kill")
    e = c2.call("readJob", sessionId=sid, jobId=jid, filter="(a*)*")
    T.eq(e.get("error", {}).get("data"), {"field": "filter"},
         "a costly filter is refused like a rule pattern")
    e = c2.call("resizeJob", sessionId=sid, jobId=jid, cols=80, rows=24)
    T.eq(e.get("error", {}).get("code"), -32005, "resize of an ended job")
    c2.close()
    c.ok("closeSession", sessionId=sid)
    c.close()


def yields(d):
    """yield_ms: the output so far in the result; a command that ends
    before it gets its ordinary result and is no job."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    (res, meta), = turn(c, sid, ("bash", {
        "command": "echo early; sleep 30", "run_in_background": True,
        "yield_ms": int(pydaemon.scaled(500))}))
    T.eq(meta["reason"], "background", "still running after yield_ms")
    T.check("early" in res["content"], "with the output so far: " +
            res["content"])
    (res, meta), = turn(c, sid, ("bash", {
        "command": "echo quick", "run_in_background": True,
        "yield_ms": int(pydaemon.scaled(3000))}))
    T.eq((meta["reason"], res["content"]), ("ok", "quick\n"),
         "ended before yield_ms: an ordinary result")
    T.eq(len(c.ok("listJobs", sessionId=sid)["jobs"]), 1, "one job only")
    # A turn discarded or aborted leaves the job alone.
    c.ok("abort", sessionId=sid, reason="interrupt")
    c.ok("discard", sessionId=sid)
    T.eq(job_of(c, sid, "j-1")["status"], "running",
         "abort and discard leave the job")
    c.ok("closeSession", sessionId=sid)
    c.close()


def terminal(d):
    """A real bc on a real terminal, driven by writeJob; and writeStdin
    for a foreground tool."""
    c = Conn(d.sock)
    tools = [{"name": "bc", "command": ["bc", "-q"], "tty": True,
              "background": True, "ttySize": {"cols": 100, "rows": 30}},
             {"name": "tty", "command": ["/bin/sh", "-c",
              "[ -t 0 ] && [ -t 1 ] && stty size"], "tty": True},
             {"name": "two", "command": ["head", "-n", "2"],
              "stdin": "stream", "timeoutMs": 10000},
             {"name": "peek", "command": ["/bin/sh", "-c",
              "exec 3<>\"$0\"", "{path}"], "sandbox": "read-only"}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    (res, meta), = turn(c, sid, ("tty", {}))
    T.eq(res["content"].strip(), "24 80", "a terminal of the default size")
    (res, meta), = turn(c, sid, ("bc", {}))
    jid = meta["job"]["jobId"]
    T.check(job_of(c, sid, jid)["tty"], "listJobs: tty")
    c.ok("writeJob", sessionId=sid, jobId=jid, data="2+2\n")
    text = ""
    t0 = time.monotonic()
    while ("4\r\n" not in text and
           time.monotonic() - t0 < pydaemon.scaled(10)):
        text += c.ok("readJob", sessionId=sid, jobId=jid,
                     waitMs=2000)["text"]
    T.check("4\r\n" in text, "bc answers 2+2 on its terminal: %r" % text)
    T.eq(c.ok("resizeJob", sessionId=sid, jobId=jid, cols=120, rows=40),
         {}, "resizeJob")
    # Another tool cannot open its terminal by name to read its keys.
    pts = os.readlink("/proc/%d/fd/0" % job_of(c, sid, jid)["pid"])
    T.check(pts.startswith("/dev/pts/"), "bc's stdin is a terminal: " + pts)
    (res, meta), = turn(c, sid, ("peek", {"path": pts}))
    T.check(res["is_error"] and "denied" in res["content"],
            "a read-only tool cannot open another's terminal: %r"
            % res["content"])
    c.ok("writeJob", sessionId=sid, jobId=jid, data="quit\n")
    for _ in range(100):
        if job_of(c, sid, jid)["status"] != "running":
            break
        time.sleep(0.05)
    T.eq(job_of(c, sid, jid)["reason"], "ok", "bc quits")
    # writeStdin: a foreground tool reads what comes while it runs.
    c.ok("addTool", sessionId=sid, toolUse={"id": "w1", "name": "two",
                                            "input": {}})
    T.eq(c.ok("writeStdin", sessionId=sid, toolUseId="w1",
              data="\nsecond\n"), {"written": 8}, "writeStdin")
    c.ok("drain", sessionId=sid)
    got = [n["params"]["result"]["content"] for n in
           c.ok("events", sessionId=sid)["notifications"]
           if n["method"] == "tool_result" and
           n["params"]["toolUseId"] == "w1"]
    T.eq(got, ["{}\nsecond\n"], "the tool read the input, then the rest")
    c.ok("addTool", sessionId=sid, toolUse={"id": "w2", "name": "two",
                                            "input": {}})
    c.ok("writeStdin", sessionId=sid, toolUseId="w2", data="\n", eof=True)
    e = c.call("writeStdin", sessionId=sid, toolUseId="w2", data="x")
    T.eq(e.get("error", {}).get("code"), -32005, "writeStdin after eof")
    c.ok("drain", sessionId=sid)
    e = c.call("writeStdin", sessionId=sid, toolUseId="w1", data="x")
    T.eq(e.get("error", {}).get("data"), {"field": "toolUseId"},
         "writeStdin to a tool of an ended turn")
    e = c.call("writeStdin", sessionId=sid, toolUseId="nope", data="x")
    T.eq(e.get("error", {}).get("data"), {"field": "toolUseId"},
         "writeStdin to no such tool")
    c.ok("closeSession", sessionId=sid)
    c.close()


def new_image(d, c, before):
    """Wait until initialize on c names another instance than before."""
    for _ in range(200):
        now = c.ok("initialize")["server"].get("instance")
        if now != before:
            return now
        time.sleep(0.05)
    raise AssertionError("no new image")


def reload_carries_jobs(d):
    """A reload hands jobs over like tools (doc/design.md §7, Reload): the
    same process, its output before and after, its stdin and terminal,
    and a background call still within its yieldMs becomes a job then."""
    c = Conn(d.sock)
    tools = [{"name": "bc", "command": ["bc", "-q"], "tty": True,
              "background": True}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    (res, meta), = turn(c, sid, ("bash", {
        "command": "echo before; read -r x; read -r y; echo got $y; "
                   "sleep 300",
        "run_in_background": True}))
    pid = meta["job"]["pid"]
    (res, meta), = turn(c, sid, ("bc", {}))
    c.ok("writeJob", sessionId=sid, jobId="j-2", data="1+1\n")
    # A call that would become a job only in 30 s: at the reload it does.
    c.ok("addTool", sessionId=sid, toolUse={"id": "late", "name": "bash",
         "input": {"command": "echo late; sleep 300",
                   "run_in_background": True, "yield_ms": 30000}})
    time.sleep(pydaemon.scaled(0.3))
    before = c.ok("initialize")["server"].get("instance")
    # A long-poll pending across the reload is answered, not lost.
    poll = Conn(d.sock)
    poll.ok("readJob", sessionId=sid, jobId="j-1", waitMs=1)
    poll.f.write((json.dumps({"jsonrpc": "2.0", "id": 5, "method":
                              "readJob", "params": {
                                  "sessionId": sid, "jobId": "j-1",
                                  "waitMs": 60000}}) + "\n").encode())
    poll.f.flush()
    time.sleep(pydaemon.scaled(0.2))
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, c, before)
    poll.s.settimeout(pydaemon.scaled(10))
    answer = json.loads(poll.f.readline())
    T.eq((answer.get("id"), answer.get("result", {}).get("status")),
         (5, "running"), "the pending readJob is answered at the reload")
    poll.close()
    j = job_of(c, sid, "j-1")
    T.eq((j["status"], j["pid"]), ("running", pid),
         "the job runs on in the new image, the same process")
    # Its input (the call's JSON, no newline) came first: end that line.
    T.eq(c.ok("writeJob", sessionId=sid, jobId="j-1", data="\nyes\n"),
         {"written": 5}, "its stdin came across")
    T.eq(output_until(c, sid, "j-1", "got yes"), "before\ngot yes\n",
         "its output before and after")
    c.ok("writeJob", sessionId=sid, jobId="j-2", data="6*7\n")
    text = output_until(c, sid, "j-2", "42\r\n")
    # "1+1" may be echoed twice: written before bc's readline took the
    # terminal, the kernel echoes it (cooked mode) and readline again as
    # it reads it, as on any terminal typed ahead into. Each answer comes
    # once, in order: nothing is lost or replayed by the handover.
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace(
        "\r\n", "\n").replace("\r", "\n").split("\n")
    T.eq([ln for ln in lines if ln in ("2", "42", "6*7")], ["2", "6*7", "42"],
         "the terminal job answers across the reload: %r" % text)
    c.ok("drain", sessionId=sid)
    late = [n["params"] for n in c.ok("events", sessionId=sid)[
        "notifications"] if n["method"] == "tool_result" and
        n["params"]["toolUseId"] == "late"]
    T.eq([p["meta"]["reason"] for p in late], ["background"],
         "a call within its yieldMs became a job at the reload")
    T.eq(job_of(c, sid, "j-3")["status"], "running", "and runs on")
    (res, meta), = turn(c, sid, ("kill_shell", {"shell_id": "j-1"}))
    T.eq(res["is_error"], False, "kill_shell after the reload")
    T.eq(job_of(c, sid, "j-1")["status"], "killed", "it ended")
    c.ok("closeSession", sessionId=sid)
    T.eq(d.leftovers(), [], "nothing is left")
    c.close()


def reload_carries_input(d):
    """A foreground tool with an open stdin, or on a terminal, is handed
    over by a reload (doc/design.md §7, Reload) and takes input after it."""
    c = Conn(d.sock)
    tools = [{"name": "two", "command": ["head", "-n", "2"],
              "stdin": "stream", "timeoutMs": 20000,
              "concurrencySafe": True},
             {"name": "calc", "command": ["bc", "-q"], "tty": True,
              "timeoutMs": 20000, "concurrencySafe": True}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    before = c.ok("initialize")["server"].get("instance")
    c.ok("addTool", sessionId=sid, toolUse={"id": "h1", "name": "two",
                                            "input": {}})
    c.ok("addTool", sessionId=sid, toolUse={"id": "h2", "name": "calc",
                                            "input": {}})
    c.close()
    d.proc.send_signal(signal.SIGHUP)
    after = before
    for _ in range(200):
        try:
            c = Conn(d.sock)
            after = c.ok("initialize")["server"].get("instance")
            if after != before:
                break
            c.close()
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    T.check(after != before, "the reload happened")
    T.eq(c.ok("writeStdin", sessionId=sid, toolUseId="h1",
              data="\nafter\n"), {"written": 7}, "stdin still open")
    c.ok("writeStdin", sessionId=sid, toolUseId="h2", data="6*7\nquit\n")
    c.ok("drain", sessionId=sid)
    got = {n["params"]["toolUseId"]: n["params"]["result"]["content"]
           for n in c.ok("events", sessionId=sid)["notifications"]
           if n["method"] == "tool_result"}
    T.eq(got.get("h1"), "{}\nafter\n", "the input, then what came after")
    T.check("42" in got.get("h2", ""), "bc answered on its terminal: %r"
            % got.get("h2"))
    c.ok("closeSession", sessionId=sid)
    c.close()


def wait_status(sub, tid, status):
    """Read sub's notifications until tool_status tid status."""
    sub.s.settimeout(pydaemon.scaled(10))
    while True:
        n = json.loads(sub.f.readline())
        if (n.get("method") == "tool_status" and
                n["params"]["toolUseId"] == tid and
                n["params"]["status"] == status):
            return


def early_stdin(d):
    """writeStdin to a stdin: "stream" tool that has not started yet (it
    waits behind an unsafe one): held, handed over at its start before
    what comes later; eof remembered; the same bound as a running tool's;
    dropped and said so when it never starts, across a reload too."""
    c = Conn(d.sock)
    tools = [{"name": "gate", "command": ["head", "-n", "1"],
              "stdin": "stream", "interruptBehavior": "cancel",
              "timeoutMs": 30000},
             {"name": "two", "command": ["head", "-n", "2"],
              "stdin": "stream", "timeoutMs": 30000},
             {"name": "cat", "command": ["cat"], "stdin": "stream",
              "timeoutMs": 30000},
             {"name": "plain", "command": ["cat"], "timeoutMs": 30000}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    sub = Conn(d.sock)
    sub.ok("subscribe", sessionId=sid)

    def add(tid, name):
        return c.ok("addTool", sessionId=sid, toolUse={
            "id": tid, "name": name, "input": {}})["status"]

    def results():
        return {n["params"]["toolUseId"]: n["params"] for n in
                c.ok("events", sessionId=sid)["notifications"]
                if n["method"] == "tool_result"}

    # Queued behind gate: the bytes wait for the start, then come first.
    add("g1", "gate")
    T.eq(add("q1", "two"), "queued", "q1 waits behind the unsafe gate")
    T.eq(c.ok("writeStdin", sessionId=sid, toolUseId="q1", data="\nea"),
         {"written": 3}, "writeStdin to a queued tool is accepted")
    T.eq(c.ok("writeStdin", sessionId=sid, toolUseId="q1", data="rly"),
         {"written": 3}, "and more of it")
    T.eq(add("q2", "cat"), "queued", "q2 queued too")
    c.ok("writeStdin", sessionId=sid, toolUseId="q2", data="abc", eof=True)
    e = c.call("writeStdin", sessionId=sid, toolUseId="q2", data="x")
    T.eq((e.get("error", {}).get("code"), e.get("error", {}).get(
        "message")), (-32005, "State conflict: tool q2: its stdin is "
                      "closed"), "a queued tool's eof is remembered")
    add("p1", "plain")
    e = c.call("writeStdin", sessionId=sid, toolUseId="p1", data="x")
    T.eq(e.get("error", {}).get("code"), -32005,
         "a queued tool whose stdin is not streamed: " + str(e))
    c.ok("writeStdin", sessionId=sid, toolUseId="g1", data="go\n")
    wait_status(sub, "q1", "executing")
    c.ok("writeStdin", sessionId=sid, toolUseId="q1", data="\n")
    c.ok("drain", sessionId=sid)
    got = results()
    T.eq(got["q1"]["result"]["content"], "{}\nearly\n",
         "the input, the early bytes, then what came after the start")
    T.eq(got["q1"]["meta"]["warnings"], [], "nothing was dropped")
    T.eq(got["q2"]["result"]["content"], "{}abc",
         "the early eof closed its stdin after the bytes")
    T.eq(got["p1"]["result"]["content"], "{}", "p1 ran as ever")

    # The bound: the same 1 MiB and the same error as a running tool's.
    add("g2", "gate")
    add("q3", "cat")
    mib = "y" * 1048576
    T.eq(c.ok("writeStdin", sessionId=sid, toolUseId="q3", data=mib),
         {"written": 1048576}, "1 MiB may wait for the start")
    e = c.call("writeStdin", sessionId=sid, toolUseId="q3", data="z")
    early = e.get("error", {})
    e = c.call("writeStdin", sessionId=sid, toolUseId="g2",
               data=mib + "z")
    running = e.get("error", {})
    T.eq((early.get("code"), early.get("message", "").replace("q3", "T")),
         (running.get("code"), running.get("message", "").replace(
             "g2", "T")), "over the bound: the running tool's error")
    T.check("1048576" in running.get("message", ""), str(running))
    # A hard abort: the queued tool never starts, its result says so.
    c.ok("abort", sessionId=sid, reason="cancel")
    c.ok("drain", sessionId=sid)
    got = results()
    T.eq(got["q3"]["meta"]["reason"], "interrupted", "q3 never started")
    T.eq(got["q3"]["meta"]["warnings"], ["1048576 bytes of stdin queued "
         "before the start were dropped"], "and its result says so")

    # A discard drops them, and its answer says so.
    add("g3", "gate")
    add("q4", "two")
    c.ok("writeStdin", sessionId=sid, toolUseId="q4", data="12345")
    r = c.ok("discard", sessionId=sid)
    T.eq(r.get("stdinDropped"), {"q4": 5}, "discard says what it dropped")
    r = c.ok("discard", sessionId=sid)
    T.eq("stdinDropped" in r, False, "and only when it dropped some")

    # A reload carries what a still queued tool holds, and its eof.
    add("g4", "gate")
    add("q5", "cat")
    c.ok("writeStdin", sessionId=sid, toolUseId="q5", data="\u00e9\u0000x",
         eof=True)
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(d, c, before)
    e = c.call("writeStdin", sessionId=sid, toolUseId="q5", data="x")
    T.eq(e.get("error", {}).get("message"), "State conflict: tool q5: "
         "its stdin is closed", "the early eof came across")
    c.ok("writeStdin", sessionId=sid, toolUseId="g4", data="go\n")
    c.ok("drain", sessionId=sid)
    got = results()
    T.eq(got["q5"]["result"]["content"], "{}\u00e9\u0000x",
         "the early bytes came across the reload")
    sub.close()
    c.ok("closeSession", sessionId=sid)
    T.eq(d.leftovers(), [], "nothing is left")
    c.close()


def slots(d):
    """A job holds no --max-procs slot (the daemon runs with 2): two jobs
    run and ordinary tools still run beside them."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    for i in range(3):
        (res, meta), = turn(c, sid, ("bash", {"command": "sleep 300",
                                              "run_in_background": True}))
        T.eq(meta["reason"], "background", "job %d of 3 on 2 slots" % i)
    t0 = time.monotonic()
    (res, meta), = turn(c, sid, ("bash", {"command": "echo free"}))
    T.eq(res["content"], "free\n", "a tool runs beside three jobs")
    T.check(time.monotonic() - t0 < pydaemon.scaled(5),
            "without waiting for a slot")
    c.ok("closeSession", sessionId=sid)
    c.close()


def forgets_old(d):
    """A session keeps its last --max-jobs-per-session ended jobs (3
    here), and forgets older ones: starting job after job stays bounded."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    (res, meta), = turn(c, sid, ("bash", {"command": "sleep 300",
                                          "run_in_background": True}))
    for i in range(5):
        (res, meta), = turn(c, sid, ("bash", {
            "command": "sleep 0.1; echo %d" % i, "run_in_background": True}))
        c.ok("readJob", sessionId=sid, jobId=meta["job"]["jobId"],
             waitMs=5000)
        while job_of(c, sid, meta["job"]["jobId"])["status"] == "running":
            time.sleep(0.02)
    for _ in range(100):
        jobs = c.ok("listJobs", sessionId=sid)["jobs"]
        if sum(j["status"] != "running" for j in jobs) >= 3 and \
                sum(j["status"] == "running" for j in jobs) == 1:
            break
        time.sleep(0.1)
    T.eq([j["jobId"] for j in jobs], ["j-1", "j-4", "j-5", "j-6"],
         "the running job and the last three that ended are kept")
    c.ok("signalJob", sessionId=sid, jobId="j-1", signal="kill")
    for _ in range(100):
        jobs = c.ok("listJobs", sessionId=sid)["jobs"]
        if jobs[0]["jobId"] != "j-1" or jobs[0]["status"] != "running":
            break
        time.sleep(0.05)
    T.eq([j["jobId"] for j in jobs], ["j-4", "j-5", "j-6"],
         "once the oldest ends, it is the one forgotten")
    c.ok("closeSession", sessionId=sid)
    c.close()


def parallel_calls_count(d):
    """Background calls in flight count against --max-jobs-per-session (3)
    before they are jobs: of five parallel ones, three become jobs."""
    c = Conn(d.sock)
    # The tool's time and its yield scale together (tests/README.md).
    tools = [{"name": "bg", "command": ["sleep", str(pydaemon.scaled(1))],
              "background": True, "concurrencySafe": True,
              "yieldMs": int(pydaemon.scaled(300))}]
    sid = c.ok("createSession", tools=tools)["sessionId"]
    got = turn(c, sid, *[("bg", {})] * 5)
    T.eq(sorted(m["reason"] for _, m in got),
         ["background"] * 3 + ["ok"] * 2,
         "three jobs, two ordinary tools")
    c.ok("closeSession", sessionId=sid)
    c.close()


def idle_expiry_kills(d):
    """A session's idle expiry ends its jobs like closeSession: a job alone
    does not keep a session with no client alive (doc/design.md §7, Jobs)."""
    d2 = pydaemon.Daemon(d.path, ["--session-idle-timeout", "1"])
    d2.start()
    try:
        for _ in range(200):
            if os.path.exists(d2.sock):
                break
            time.sleep(0.05)
        c = Conn(d2.sock)
        sid = c.ok("createSession")["sessionId"]
        (res, meta), = turn(c, sid, ("bash", {"command": "sleep 300",
                                              "run_in_background": True}))
        T.eq(meta["reason"], "background", "a job runs")
        c.close()
        # The event is the job's end; the guard only stops a hang. (A call
        # naming the session would hold it open: none until then.) Two
        # empty scans in a row: the job's shell may be exec'ing its sleep
        # at the first, and a process's environ reads empty across its
        # exec, so one scan can miss a process that is there.
        guard = time.monotonic() + pydaemon.scaled(120)
        empty = 0
        while empty < 2 and time.monotonic() < guard:
            empty = 0 if d2.leftovers() else empty + 1
            time.sleep(0.1)
        T.eq(d2.leftovers(), [], "the expired session's job is gone")
        c = Conn(d2.sock)
        e = c.call("listJobs", sessionId=sid)
        T.eq(e.get("error", {}).get("code"), -32001, "and so is its session")
        c.close()
    finally:
        T.eq(d2.stop(), 0, "the second daemon stops cleanly")
        shutil.rmtree(d2.tmp, ignore_errors=True)


def close_kills(d):
    """closeSession kills every job, with what it started."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    for i in range(3):
        (res, meta), = turn(c, sid, ("bash", {
            "command": "sleep 300 & sleep 300; wait",
            "run_in_background": True}))
        T.eq(meta["reason"], "background", "job %d" % i)
    for _ in range(100):
        if len(d.leftovers()) >= 6:
            break
        time.sleep(0.05)
    T.eq(len(d.leftovers()) >= 6, True, "the jobs run")
    # Long-polls are bounded: past 64 on a job the oldest is answered.
    c3 = Conn(d.sock)
    for i in range(66):
        c3.f.write((json.dumps({"jsonrpc": "2.0", "id": 1000 + i,
                                "method": "readJob", "params": {
                                    "sessionId": sid, "jobId": "j-1",
                                    "waitMs": 60000}}) + "\n").encode())
    c3.f.flush()
    first = [json.loads(c3.f.readline())["id"] for _ in range(2)]
    T.eq(sorted(first), [1000, 1001], "the oldest waiting reads answered")
    c.ok("closeSession", sessionId=sid)
    T.eq(d.leftovers(), [], "closeSession leaves nothing")
    rest = [json.loads(c3.f.readline()) for _ in range(64)]
    T.eq(sum(1 for m in rest if m["result"]["status"] == "killed"), 64,
         "the other reads are answered when the job dies")
    c3.close()
    c.close()


def crash(d):
    """A crash kills jobs like every tool; the journal kept each
    job_output's place and size, not its text (as for streamed chunks)."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    (res, meta), = turn(c, sid, ("bash", {
        "command": "sleep 0.3; echo later; sleep 300",
        "run_in_background": True}))
    r = c.ok("readJob", sessionId=sid, jobId="j-1", since=0, waitMs=5000)
    T.eq(r["text"], "later\n", "the job said something")
    time.sleep(pydaemon.scaled(0.2))
    c.close()
    d.proc.kill()
    d.proc.wait()
    d.log.close()
    d.start()
    for _ in range(200):
        try:
            c = Conn(d.sock)
            break
        except OSError:
            time.sleep(0.05)
    notes = c.ok("events", sessionId=sid, since=0)["notifications"]
    outs = [n["params"] for n in notes if n["method"] == "job_output"]
    T.eq([(o["text"], o.get("elided")) for o in outs], [("", 6)],
         "job_output comes back elided after a crash")
    T.eq(c.ok("listJobs", sessionId=sid)["jobs"], [],
         "no job survives a crash")
    T.eq(d.leftovers(), [], "the crashed daemon's job was killed")
    c.ok("closeSession", sessionId=sid)
    c.close()


def stop_while_killing(d):
    """The daemon stops cleanly while a kill_shell waits for a job that
    ignores TERM, and leaves nothing."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    (res, meta), = turn(c, sid, ("bash", {
        "command": "trap '' TERM; echo ready; while :; do sleep 0.1; done",
        "run_in_background": True}))
    # Its trap must be set before the TERM comes.
    c.ok("readJob", sessionId=sid, jobId="j-1", since=0, waitMs=5000)
    c.ok("addTool", sessionId=sid, toolUse={
        "id": "k", "name": "kill_shell", "input": {"shell_id": "j-1"}})
    st = c.ok("status", sessionId=sid)["tools"]
    T.eq([(t["id"], t["status"]) for t in st if t["id"] == "k"],
         [("k", "executing")], "kill_shell waits for the job's end")
    c.close()
    d.proc.send_signal(signal.SIGTERM)
    T.eq(d.proc.wait(timeout=pydaemon.scaled(15)), 0,
         "the daemon stops cleanly meanwhile")
    T.eq(d.leftovers(), [], "and leaves nothing")
    d.log.close()
    d.start()
    for _ in range(200):
        if os.path.exists(d.sock):
            break
        time.sleep(0.05)


def body(d):
    for _ in range(100):
        if os.path.exists(d.sock):
            break
        time.sleep(0.05)
    c = Conn(d.sock)
    caps = c.ok("initialize")["capabilities"]
    T.eq(caps.get("jobs"), {"maxPerSession": 3, "outputBytes": 4194304},
         "initialize reports the job limits")
    c.close()
    for test in (dev_server, read_job, yields, terminal, reload_carries_jobs,
                 reload_carries_input, early_stdin,
                 slots, forgets_old, parallel_calls_count,
                 idle_expiry_kills, close_kills,
                 crash,
                 stop_while_killing):
        test(d)


if __name__ == "__main__":
    sys.exit(pydaemon.run(T, body, ["--max-procs", "2",
                                    "--max-jobs-per-session", "3"]))
