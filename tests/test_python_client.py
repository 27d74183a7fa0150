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
import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

WAIT = float(os.environ.get("STEXEC_TEST_WAIT", "20"))
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
        c.connect(timeout=10)
        self.c = c
        c.ping()
        info = c.initialize("test_python_client", "1")
        T.eq(info.get("protocolVersion"), 1, "initialize protocolVersion")
        T.eq(c.stats().get("pid"), self.d.proc.pid, "stats pid")
        T.check(any(f["name"] == "stexec_sessions" for f in
                    c.metrics()["metrics"]), "metrics has stexec_sessions")
        names = {t["name"] for t in c.list_tools()}
        T.check({"bash", "read_file"} <= names,
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
        res = turn.add("sl", "bash", {"command": "sleep 30; echo never"})
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
        T.check(t0 is not None and time.monotonic() - t0 < 10,
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
        time.sleep(0.5)   # ticks go on while nobody listens
        c.reconnect(timeout=5)
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
        self.collect(c.notifications(timeout=0.3, session_id=sid))
        last = c.last_seq(sid)
        T.eq(last, self.seen[-1].seq if self.seen else None,
             "last_seq is the newest notification")
        c.reconnect(resubscribe=False)
        T.eq(c.subscribe(sid, since=last - 5), last,
             "resubscribe lastSeq")
        c.ping()
        dup = list(c.notifications(timeout=0.3, session_id=sid))
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
        closed = self.collect(c.notifications(timeout=2, session_id=sid))
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
    return pydaemon.run(T, steps)


if __name__ == "__main__":
    sys.exit(main())
