#!/usr/bin/env python3
"""
End-to-end test of client/python/stexec/ against a real stexecd: starts
the daemon on a private socket in a temporary directory and drives whole
turns through the Python client (the Turn helper and the plain methods).

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_python_client.py

Standard library only. Exit 0 when every check passed, 1 otherwise, 77
(skipped) when STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import os
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))

import stexec  # noqa: E402
from stexec import Client, StexecError, Turn  # noqa: E402
import fakejobs  # noqa: E402
import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

WAIT = pydaemon.scaled(float(os.environ.get("STEXEC_TEST_WAIT", "20")))
INTERRUPTED = "<tool_use_error>Interrupted by user</tool_use_error>"

# A session tool: reports progress on fd 3, then works a little.
STEPPER = {
    "name": "stepper",
    "description": "reports one progress step, then finishes",
    "command": ["/bin/sh", "-c",
                "printf '{\"progress\":{\"step\":\"start\"}}\\n' >&3; "
                "sleep 1.5; echo stepped"],
    "concurrencySafe": True,
}
# Progress over a while: notifications flow while the client is away.
TICKER = {
    "name": "ticker",
    "description": "six progress ticks, 150 ms apart",
    "command": ["/bin/sh", "-c",
                "for i in 1 2 3 4 5 6; do "
                "printf '{\"progress\":{\"tick\":%s}}\\n' $i >&3; "
                "sleep 0.15; done; echo ticked"],
    "concurrencySafe": False,
}


T = Checks()


def index_of(notes, pred):
    for i, n in enumerate(notes):
        if pred(n):
            return i
    return -1


def results_of(notes):
    return [n for n in notes if n.method == "tool_result"]


def test_offline():
    """What needs no daemon: socket path rules, the connect error."""
    d = stexec.default_socket_path
    T.eq(d({"STEXEC_SOCKET": "/x/s", "XDG_RUNTIME_DIR": "/r"}), "/x/s",
         "default socket: $STEXEC_SOCKET first")
    T.eq(d({"XDG_RUNTIME_DIR": "/run/user/7"}),
         "/run/user/7/stexec/stexecd.sock",
         "default socket: $XDG_RUNTIME_DIR/stexec/stexecd.sock")
    T.eq(d({"STEXEC_SOCKET": "", "XDG_RUNTIME_DIR": ""}),
         "/run/stexec/stexecd.sock", "default socket: /run/stexec last")
    missing = os.path.join(tempfile.gettempdir(), "stexec-no-such-dir-%d"
                           % os.getpid(), "s.sock")
    try:
        Client(missing)
        T.check(False, "connecting to a missing socket raised nothing")
    except stexec.StexecConnectionError as e:
        msg = str(e)
        T.check(msg.startswith("cannot connect to " + missing + ": ") and
                "is stexecd running?" in msg,
                "connect error message: %r" % msg)


def test_jobs_fake():
    """The job methods and JobOutput against tests/fakejobs.py (PROTOCOL.md
    §4, Jobs): the params on the wire, errors, long polls, ends, filters."""
    f = fakejobs.FakeDaemon()
    sid = fakejobs.SESSION
    c = Client(f.sock, timeout=WAIT)
    try:
        def last(method):
            return [p for m, p in f.requests if m == method][-1]
        job = f.add_job(tty=True)
        jid = job.info["jobId"]
        f.output(job, "hello\n")
        jobs = c.list_jobs(sid)
        T.eq([(j["jobId"], j["status"], j["outputBytes"]) for j in jobs],
             [(jid, "running", 6)], "list_jobs")
        r = c.read_job(sid, jid, since=1, max_bytes=3)
        T.eq((r["text"], r["offset"], r["next"]), ("ell", 1, 4),
             "read_job since, max_bytes")
        T.eq(last("readJob"), {"sessionId": sid, "jobId": jid, "since": 1,
                               "maxBytes": 3}, "readJob params")
        T.eq(c.read_job(sid, jid)["text"], "hello\n",
             "read_job without since: the session's position")
        T.eq(c.write_job(sid, jid, "2+2\n"), 4, "write_job written")
        T.eq(last("writeJob"), {"sessionId": sid, "jobId": jid,
                                "data": "2+2\n"}, "writeJob params")
        c.write_job(sid, jid, "", eof=True)
        T.eq(last("writeJob").get("eof"), True, "write_job eof")
        try:
            c.write_job(sid, jid, "more")
            T.check(False, "write_job after eof succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.STATE_CONFLICT, "write_job after eof")
        c.resize_job(sid, jid, 120, 40)
        T.eq(job.size, (120, 40), "resize_job")
        c.signal_job(sid, jid, "interrupt")
        T.eq(last("signalJob")["signal"], "interrupt", "signal_job params")
        T.eq(c.list_jobs(sid)[0]["status"], "killed", "signalled: killed")
        try:
            c.read_job(sid, "j-99")
            T.check(False, "read_job of no such job succeeded")
        except StexecError as e:
            T.eq((e.code, e.data), (stexec.INVALID_PARAMS,
                                    {"field": "jobId"}), "unknown job id")
        f.streaming.add("toolu_9")
        T.eq(c.write_stdin(sid, "toolu_9", "y\n", eof=True), 2,
             "write_stdin")
        T.eq(last("writeStdin"), {"sessionId": sid, "toolUseId": "toolu_9",
                                  "data": "y\n", "eof": True},
             "writeStdin params")
        f.missing.add("listJobs")
        try:
            c.list_jobs(sid)
            T.check(False, "listJobs of a daemon without jobs succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.METHOD_NOT_FOUND, "no jobs: -32601")
        f.missing.clear()

        # JobOutput: long polls from explicit offsets until the end.
        job = f.add_job()
        jid = job.info["jobId"]
        f.output(job, "one\n")
        f.later(0.1, f.output, job, "two\n")
        f.later(0.2, f.output, job, "three")
        f.later(0.3, f.exit, job, 3)
        it = c.job_output(sid, jid, wait_ms=5000)
        T.eq("".join(it), "one\ntwo\nthree", "job_output: every chunk")
        T.eq((it.last["status"], it.last["exitCode"]), ("exited", 3),
             "job_output: last says how it ended")
        reads = f.reads_of(jid)
        T.check(len(reads) <= 8 and all(
            isinstance(p.get("since"), int) and p.get("waitMs") == 5000
            for p in reads), "job_output long-polls by offset: %r" % reads)
        T.eq(job.cursor, 0, "job_output leaves the session's position")
        job = f.add_job()
        jid = job.info["jobId"]
        f.output(job, "GET /a\nnoise\nGET /b\npartial GET")
        f.exit(job)
        T.eq(list(c.job_output(sid, jid, filter="GET")),
             ["GET /a\nGET /b\npartial GET"], "job_output with a filter")
        T.eq(list(c.job_output(sid, jid, since=7, max_bytes=6)),
             ["noise\n", "GET /b", "\nparti", "al GET"],
             "job_output from since, by max_bytes")
        # A filter that holds back a partial line: no spinning.
        job = f.add_job()
        jid = job.info["jobId"]
        f.output(job, "no newline yet")
        f.later(0.3, f.output, job, "\n")
        f.later(0.4, f.exit, job)
        T.eq(list(c.job_output(sid, jid, filter=".", wait_ms=2000)),
             ["no newline yet\n"], "job_output: a partial line waits")
        T.check(len(f.reads_of(jid)) <= 8,
                "no busy polling: %d reads" % len(f.reads_of(jid)))
        T.eq(stexec.job_of({"reason": "background",
                            "job": {"jobId": "j-3", "pid": 7}}),
             {"jobId": "j-3", "pid": 7}, "job_of")
        T.eq(stexec.job_of({"reason": "ok"}), None, "job_of: no job")
    finally:
        c.close()
        f.stop()


def shell_real(d):
    """create_session's shell reaches the daemon: keepCwd false keeps each
    bash call in the session's cwd, and a bad value is the daemon's error."""
    c = Client(d.sock, timeout=WAIT)
    top = tempfile.mkdtemp(prefix="stexec-pyshell-")
    os.mkdir(os.path.join(top, "sub"))
    try:
        for shell, want in (({"keepCwd": False}, top),
                            ({"keepCwd": True}, top + "/sub")):
            sid = c.create_session(cwd=top, shell=shell)
            res = Turn(c, sid).run([
                {"id": "a", "name": "bash", "input": {"command": "cd sub"}},
                {"id": "b", "name": "bash", "input": {"command": "pwd"}}])
            T.eq(res[1]["content"], want + "\n", "shell=%r" % shell)
            c.close_session(sid)
        try:
            c.create_session(shell={"keepCwd": 1})
            T.check(False, "shell keepCwd 1 is refused")
        except StexecError as e:
            T.eq(e.code, stexec.INVALID_PARAMS, "shell keepCwd 1: %s" % e)
    finally:
        c.close()
        os.rmdir(os.path.join(top, "sub"))
        os.rmdir(top)


def jobs_real(d):
    """Jobs against the real daemon: a background tool fed by write_job
    and followed by job_output to its end, signal_job, the errors; skipped
    by a daemon without them."""
    c = Client(d.sock, timeout=WAIT)
    echo = {"name": "echo", "background": True,
            "command": ["/bin/sh", "-c", "echo ready; exec cat"]}
    sid = c.create_session(tools=[echo])
    try:
        try:
            c.list_jobs(sid)
        except StexecError as e:
            if e.code != stexec.METHOD_NOT_FOUND:
                raise
            print("skip: this daemon has no jobs (listJobs: %s)" % e)
            return
        turn = Turn(c, sid)
        turn.run([{"id": "j1", "name": "echo", "input": {}},
                  {"id": "j2", "name": "echo", "input": {}}])
        jobs = [stexec.job_of(turn.meta[i]) for i in ("j1", "j2")]
        T.check(all(jobs), "both calls became jobs: %r" % turn.meta)
        if not all(jobs):
            return
        one, two = (j["jobId"] for j in jobs)
        T.eq({j["jobId"]: j["status"] for j in c.list_jobs(sid)},
             {one: "running", two: "running"}, "list_jobs")
        # The job's stdin has its input ({}) first, echoed by cat.
        it = c.job_output(sid, one, wait_ms=2000)
        text = ""
        wrote = False
        for chunk in it:
            text += chunk
            if not wrote and "ready\n" in text:
                wrote = True
                T.eq(c.write_job(sid, one, "hello\n"), 6, "write_job")
                c.write_job(sid, one, "bye\n", eof=True)
        T.check(text.startswith("ready\n") and
                text.endswith("hello\nbye\n"),
                "job_output to the end: %r" % text)
        T.eq((it.last["status"], it.last["exitCode"]), ("exited", 0),
             "the job exited once its stdin closed")
        # Terminated once it has said it is ready, not before it could.
        seen = ""
        for chunk in c.job_output(sid, two, wait_ms=2000):
            seen += chunk
            if "ready\n" in seen:
                break
        c.signal_job(sid, two, "terminate")
        it = c.job_output(sid, two, wait_ms=2000)
        T.check("".join(it).startswith("ready\n"),
                "the output of a terminated job")
        T.eq(it.last["status"], "killed", "signal_job: killed")
        for call, want in ((lambda: c.write_job(sid, one, "x"),
                            stexec.STATE_CONFLICT),
                           (lambda: c.resize_job(sid, two, 80, 24),
                            stexec.STATE_CONFLICT),
                           (lambda: c.read_job(sid, "j-999"),
                            stexec.INVALID_PARAMS)):
            try:
                call()
                T.check(False, "no error, %d expected" % want)
            except StexecError as e:
                T.eq(e.code, want, "job error: " + str(e))
    finally:
        c.close_session(sid)
        c.close()


class Run:
    """The online part, one session driven through several turns."""

    def __init__(self, daemon):
        self.d = daemon
        self.seen = []          # every notification of the session, in order

    def collect(self, it):
        out = []
        for n in it:
            if n.session_id == self.sid:
                self.seen.append(n)
            out.append(n)
        return out

    def connect(self):
        os.environ["STEXEC_SOCKET"] = self.d.sock
        c = Client(timeout=WAIT, connect=False)  # path from $STEXEC_SOCKET
        T.eq(c.path, self.d.sock, "Client() takes $STEXEC_SOCKET")
        c.connect(timeout=pydaemon.scaled(10))
        self.c = c
        c.ping()
        info = c.initialize("test_python_client", "1")
        T.eq(info.get("protocolVersion"), 1, "initialize protocolVersion")
        T.eq(c.stats().get("pid"), self.d.proc.pid, "stats pid")
        T.check(any(f["name"] == "stexec_sessions" for f in
                    c.metrics()["metrics"]), "metrics has stexec_sessions")
        names = {t["name"] for t in c.list_tools()}
        T.check({"bash", "read_file", "bash_session"} <= names,
                "built-in tools listed: %r" % sorted(names))

    def create(self):
        c = self.c
        for name, text in (("a.txt", "alpha\n"), ("b.txt", "beta\n")):
            with open(os.path.join(self.d.tmp, name), "w") as f:
                f.write(text)
        self.sid = c.create_session(tools=[STEPPER, TICKER], max_parallel=4,
                                    cwd=self.d.tmp,
                                    env={"GREETING": "hello"})
        T.check(isinstance(self.sid, str) and self.sid,
                "createSession gives an id")
        names = {t["name"] for t in c.list_tools(self.sid)}
        T.check({"stepper", "ticker", "bash"} <= names,
                "session tools listed: %r" % sorted(names))
        T.check(any(s["sessionId"] == self.sid for s in c.list_sessions()),
                "listSessions has the session")
        T.eq(c.subscribe(self.sid), 0, "subscribe lastSeq of a new session")
        try:
            c.call("addTool", sessionId=self.sid)
            T.check(False, "addTool without toolUse succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.INVALID_PARAMS, "addTool without toolUse")
        try:
            c.call("noSuchMethod")
            T.check(False, "an unknown method succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.METHOD_NOT_FOUND, "unknown method")

    def turn1(self):
        """Safe reads in parallel, a session tool with progress, bash, an
        unknown tool: progress first, results in add order, drain."""
        c, sid = self.c, self.sid
        turn = Turn(c, sid)
        a = os.path.join(self.d.tmp, "a.txt")
        b = os.path.join(self.d.tmp, "b.txt")
        adds = [
            ("r1", "read_file", {"file_path": a}, True),
            ("st", "stepper", {}, True),
            ("r2", "read_file", {"file_path": b}, True),
            ("sh", "bash", {"command": 'echo "$GREETING from bash"; pwd'},
             False),
            ("unk", "no_such_tool", {"x": 1}, False),
        ]
        for tid, name, inp, safe in adds:
            res = turn.add(tid, name, inp)
            T.eq(res["toolUseId"], tid, "addTool %s toolUseId" % tid)
            T.eq(res["turn"], 1, "addTool %s turn" % tid)
            T.eq(res["concurrencySafe"], safe, "addTool %s safety" % tid)
        notes = self.collect(turn.finish(timeout=WAIT))
        ids = [t[0] for t in adds]

        res = results_of(notes)
        T.eq([n.tool_use_id for n in res], ids, "tool_results in add order")
        T.eq(turn.drained, {"turn": 1, "results": 5}, "drain result")
        T.eq([r["tool_use_id"] for r in turn.results], ids,
             "Turn.results in add order")
        by = {n.tool_use_id: n.params for n in res}
        if len(by) == 5:
            T.check("alpha" in by["r1"]["result"]["content"],
                    "r1 content %r" % by["r1"]["result"]["content"])
            T.check("beta" in by["r2"]["result"]["content"],
                    "r2 content %r" % by["r2"]["result"]["content"])
            T.eq(by["st"]["result"]["content"], "stepped\n",
                 "session tool content")
            T.eq(by["sh"]["result"]["content"],
                 "hello from bash\n%s\n" % self.d.tmp,
                 "bash sees the session env and cwd")
            T.eq(by["sh"]["meta"]["reason"], "ok", "bash reason")
            T.eq(by["unk"]["result"],
                 {"type": "tool_result", "tool_use_id": "unk",
                  "content": "<tool_use_error>Error: No such tool "
                             "available: no_such_tool</tool_use_error>",
                  "is_error": True}, "unknown tool result (S1)")
            T.eq(by["unk"]["meta"]["reason"], "unknown_tool",
                 "unknown tool reason")

        prog = [i for i, n in enumerate(notes) if n.method == "progress"]
        T.eq([notes[i].params.get("data") for i in prog],
             [{"step": "start"}], "the session tool's progress (fd 3)")
        if prog:
            p = prog[0]
            T.eq(notes[p].tool_use_id, "st", "progress toolUseId")
            r_st = index_of(notes, lambda n: n.method == "tool_result" and
                            n.tool_use_id == "st")
            r_r2 = index_of(notes, lambda n: n.method == "tool_result" and
                            n.tool_use_id == "r2")
            T.check(p < r_st and p < r_r2, "progress arrives before the "
                    "results held behind it (S6)")

        def status(tid, st):
            return index_of(notes, lambda n: n.method == "tool_status" and
                            n.tool_use_id == tid and
                            n.params.get("status") == st)
        # By order, not by clock: a sanitized read_file on a loaded
        # machine can take longer than the session tool's sleep.
        T.check(0 <= status("r2", "executing") < status("st", "completed"),
                "safe r2 ran beside the slower session tool (S3)")
        T.check(0 <= status("st", "completed") < status("sh", "executing"),
                "unsafe bash waited for the safe tools (S4)")
        end = index_of(notes, lambda n: n.method == "turn_end")
        T.check(end > max(notes.index(n) for n in res) if res else False,
                "turn_end after every tool_result")
        if end >= 0:
            T.eq((notes[end].params.get("turn"),
                  notes[end].params.get("reason")), (1, "drained"),
                 "turn_end params")

    def turn2(self):
        """Interrupt a sleeping bash from another thread while this one
        iterates the turn."""
        c, sid = self.c, self.sid
        turn = Turn(c, sid)
        res = turn.add("sl", "bash", {"command": "sleep 3600; echo never"})
        T.eq(res["turn"], 2, "turn 2 after the drain")
        interrupter = None
        t0 = None
        notes = []
        for n in turn.finish(timeout=WAIT):
            if n.session_id == sid:
                self.seen.append(n)
            notes.append(n)
            if (interrupter is None and n.method == "tool_status" and
                    n.params.get("status") == "executing"):
                st = c.status(sid)
                tools = st.get("tools", [])
                T.check(len(tools) == 1 and tools[0]["status"] ==
                        "executing" and isinstance(tools[0].get("pid"), int),
                        "status shows the running bash: %r" % st)
                t0 = time.monotonic()
                interrupter = threading.Thread(target=turn.interrupt)
                interrupter.start()
        if interrupter is not None:
            interrupter.join(WAIT)
        T.check(t0 is not None, "the bash started")
        T.check(t0 is not None and
                time.monotonic() - t0 < pydaemon.scaled(10),
                "the interrupt ended the sleep promptly")
        res = results_of(notes)
        T.eq(len(res), 1, "one result in turn 2")
        if res:
            T.eq(res[0].params["result"]["content"], INTERRUPTED,
                 "interrupted content (S8)")
            T.eq(res[0].params["result"]["is_error"], True,
                 "interrupted is_error")
            T.eq(res[0].params["meta"]["reason"], "interrupted",
                 "interrupted reason")
        T.eq(turn.drained, {"turn": 2, "results": 1}, "drain of turn 2")
        T.check(any(n.method == "state" and n.params.get("interruptible")
                    for n in notes), "state said interruptible (S15)")

    def turn3(self):
        """Drop the connection while a tool reports progress and the drain
        is pending; reconnect and resume: nothing missed, nothing twice."""
        c, sid = self.c, self.sid
        before = c.last_seq(sid)
        c.add_tool(sid, "tk", "ticker", {})
        got = []
        for n in c.notifications(timeout=WAIT, session_id=sid):
            got.append(n)
            if n.method == "progress":
                break
        c.send_request("drain", {"sessionId": sid})
        c.close()
        try:
            c.ping()
            T.check(False, "a closed client still answers")
        except stexec.ConnectionLost:
            T.check(True, "a closed client raises ConnectionLost")
        time.sleep(pydaemon.scaled(0.5))  # ticks go on meanwhile
        c.reconnect(timeout=pydaemon.scaled(5))
        T.check(c.connected, "reconnected")
        for n in c.notifications(timeout=WAIT, session_id=sid):
            got.append(n)
            if n.method == "turn_end":
                break
        self.seen.extend(got)
        seqs = [n.seq for n in got]
        T.eq(seqs, list(range(before + 1, before + 1 + len(got))),
             "resumed stream: every seq once, in order")
        ticks = [n.params["data"].get("tick") for n in got
                 if n.method == "progress"]
        T.eq(ticks, [1, 2, 3, 4, 5, 6], "every tick once")
        res = results_of(got)
        T.eq([(n.tool_use_id, n.params["result"]["content"]) for n in res],
             [("tk", "ticked\n")], "the ticker's result once")
        T.check(got and got[-1].method == "turn_end" and
                got[-1].params.get("turn") == 3,
                "turn_end of turn 3 (the drain of the lost connection)")

    def turn4(self):
        """Turn.run, then a resubscribe from an older seq: the client drops
        what it already has."""
        c, sid = self.c, self.sid
        turn = Turn(c, sid)
        out = turn.run([{"type": "tool_use", "id": "f", "name": "bash",
                         "input": {"command": "echo four"}}],
                       on_notification=self.seen.append)
        T.eq([(r["tool_use_id"], r["content"]) for r in out],
             [("f", "four\n")], "Turn.run results")
        T.eq(turn.drained and turn.drained["turn"], 4, "turn 4 drained")
        # What came after the drain answer (the final state).
        self.collect(c.notifications(timeout=pydaemon.scaled(0.3),
                                     session_id=sid))
        last = c.last_seq(sid)
        T.eq(last, self.seen[-1].seq if self.seen else None,
             "last_seq is the newest notification")
        c.reconnect(resubscribe=False)
        T.eq(c.subscribe(sid, since=last - 5), last,
             "resubscribe lastSeq")
        c.ping()
        dup = list(c.notifications(timeout=pydaemon.scaled(0.3),
                                   session_id=sid))
        T.eq([n.seq for n in dup], [], "replayed duplicates are dropped")
        ev = c.events(sid, since=last - 5)
        T.eq([m["params"]["seq"] for m in ev["notifications"]],
             list(range(last - 4, last + 1)), "events since last-5")
        T.eq([m["params"] for m in ev["notifications"]],
             [n.params for n in self.seen[-5:]],
             "events returns what was pushed")

    def close(self):
        c, sid = self.c, self.sid
        seqs = [n.seq for n in self.seen]
        T.eq(seqs, list(range(1, len(seqs) + 1)),
             "the whole session: seq 1..N, no gap, no duplicate")
        c.close_session(sid)
        closed = self.collect(c.notifications(timeout=pydaemon.scaled(2),
                                              session_id=sid))
        T.eq([(n.method, n.seq) for n in closed],
             [("session_closed", len(seqs) + 1)], "session_closed")
        try:
            c.status(sid)
            T.check(False, "status of a closed session succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.UNKNOWN_SESSION, "closed session is unknown")
        c.close()


def main():
    if os.environ.get("STEXEC_DAEMON"):
        test_offline()
        test_jobs_fake()

    def steps(d):
        r = Run(d)
        for step in (r.connect, r.create, r.turn1, r.turn2, r.turn3,
                     r.turn4, r.close):
            try:
                step()
            except Exception:
                T.check(False, "%s raised:\n%s" %
                        (step.__name__, traceback.format_exc()))
                break
        for real in (shell_real, jobs_real):
            try:
                real(d)
            except Exception:
                T.check(False, "%s raised:\n%s" % (
                    real.__name__, traceback.format_exc()))
    return pydaemon.run(T, steps)


if __name__ == "__main__":
    sys.exit(main())
