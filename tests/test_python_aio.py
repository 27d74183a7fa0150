#!/usr/bin/env python3
"""
End-to-end test of the asyncio client (client/python/stexec/aio.py) against
a real stexecd on a private socket: whole turns through aio.Turn, async
iteration of notifications, requests from several tasks at once, an
interrupt from another task, resume with `since` after a dropped
connection, errors.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_python_aio.py

Exit 0 when every check passed, 1 otherwise, 77 (skipped) when
STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import asyncio
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))

import stexec  # noqa: E402
from stexec import aio, StexecError  # noqa: E402
import fakejobs  # noqa: E402
import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

WAIT = pydaemon.scaled(float(os.environ.get("STEXEC_TEST_WAIT", "20")))
INTERRUPTED = "<tool_use_error>Interrupted by user</tool_use_error>"

# A safe session tool that sleeps: the read added after it runs beside it.
NAPPER = {
    "name": "napper",
    "description": "reports progress, sleeps, then finishes",
    "command": ["/bin/sh", "-c",
                "printf '{\"progress\":{\"nap\":true}}\\n' >&3; "
                "sleep 1.5; echo napped"],
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


async def offline():
    """What needs no daemon: the connect error."""
    missing = "/nonexistent-stexec-%d/s.sock" % os.getpid()
    try:
        async with aio.Client(missing):
            pass
        T.check(False, "connecting to a missing socket raised nothing")
    except stexec.StexecConnectionError as e:
        T.check(str(e).startswith("cannot connect to " + missing) and
                "is stexecd running?" in str(e), "connect error: %s" % e)
    c = aio.Client(missing)
    try:
        await c.ping()
        T.check(False, "a request before connect succeeded")
    except stexec.ConnectionLost:
        T.check(True, "a request before connect raises ConnectionLost")


async def turn_in_order(c, tmp):
    """Safe reads beside a slower safe tool, then bash: results in add
    order, progress before the results held behind it, the drain."""
    sid = await c.create_session(tools=[NAPPER, TICKER], cwd=tmp,
                                 env={"GREETING": "hello"})
    with open(os.path.join(tmp, "a.txt"), "w") as f:
        f.write("alpha\n")
    turn = aio.Turn(c, sid)
    adds = [("n1", "napper", {}, True),
            ("r1", "read_file", {"file_path": "a.txt"}, True),
            ("sh", "bash", {"command": 'echo "$GREETING"'},
             False),
            ("unk", "no_such_tool", {}, False)]
    for tid, name, inp, safe in adds:
        res = await turn.add(tid, name, inp)
        T.eq((res["toolUseId"], res["turn"], res["concurrencySafe"]),
             (tid, 1, safe), "addTool %s" % tid)
    # Requests from other tasks while this one iterates the turn.
    notes, side = [], []

    async def sideline():
        for _ in range(5):
            side.append((await c.status(sid))["turn"])
            await c.ping()

    other = asyncio.ensure_future(sideline())
    async for n in turn.finish(timeout=WAIT):
        notes.append(n)
    await other
    T.eq(side, [1] * 5, "status from another task meanwhile")
    ids = [a[0] for a in adds]
    T.eq([n.tool_use_id for n in notes if n.method == "tool_result"], ids,
         "tool_results in add order")
    T.eq([r["tool_use_id"] for r in turn.results], ids,
         "Turn.results in add order")
    T.eq(turn.drained, {"turn": 1, "results": 4}, "drain result")
    T.eq(turn.ended, "drained", "turn_end reason")
    by = {r["tool_use_id"]: r for r in turn.results}
    if len(by) == 4:
        T.eq(by["n1"]["content"], "napped\n", "session tool result")
        T.eq(by["r1"]["content"], "     1\talpha\n", "read_file (cwd)")
        T.eq(by["sh"]["content"], "hello\n", "bash with the session env")
        T.eq(by["unk"]["is_error"], True, "unknown tool is an error")
        T.eq(turn.meta["unk"]["reason"], "unknown_tool", "meta reason")

    def pos(method, tid, status=None):
        return index_of(notes, lambda n: n.method == method and
                        n.tool_use_id == tid and
                        (status is None or n.params["status"] == status))
    # By order, not by clock: the sanitized tools on a loaded machine
    # take seconds to start.
    T.check(0 <= pos("tool_status", "r1", "executing") <
            pos("tool_status", "n1", "completed"),
            "the read ran beside the slower safe tool (S3)")
    T.check(0 <= pos("progress", "n1") < pos("tool_result", "n1"),
            "progress before its result (S6)")
    T.check(0 <= pos("tool_status", "n1", "completed") <
            pos("tool_status", "sh", "executing"),
            "bash waited for the safe tools (S4)")
    seqs = [n.seq for n in notes]
    T.eq(seqs, list(range(1, len(seqs) + 1)), "seq 1..N of the turn")
    return sid


async def interrupt_from_task(c, sid):
    """A sleeping bash interrupted by another task while finish() runs;
    async iteration over the client itself."""
    turn = aio.Turn(c, sid)
    await turn.add("sl", "bash", {"command": "sleep 3600; echo never"})
    started = None

    async def executing():
        async for n in c:          # every session of this connection
            if (n.method == "tool_status" and n.tool_use_id == "sl" and
                    n.params["status"] == "executing"):
                return time.monotonic()
    started = await asyncio.wait_for(executing(), WAIT)
    T.check(started is not None, "the bash started")
    killer = asyncio.ensure_future(turn.interrupt())
    results = [n async for n in turn.finish(timeout=WAIT)
               if n.method == "tool_result"]
    await killer
    T.check(started is not None and
            time.monotonic() - started < pydaemon.scaled(10),
            "the interrupt ended the sleep promptly")
    T.eq([(n.tool_use_id, n.params["result"]["content"]) for n in results],
         [("sl", INTERRUPTED)], "interrupted result (S8)")
    T.eq(turn.drained, {"turn": 2, "results": 1}, "drain of turn 2")


async def resume(c, sid):
    """Drop the connection while a tool reports progress and the drain is
    pending; reconnect: every notification once, in order."""
    before = c.last_seq(sid)
    turn = aio.Turn(c, sid)
    await turn.add("tk", "ticker", {})
    got = []
    async for n in c.notifications(timeout=WAIT, session_id=sid):
        got.append(n)
        if n.method == "progress":
            break
    rid = await c.send_request("drain", {"sessionId": sid})
    await c.close()
    try:
        await c.wait_response(rid, WAIT)
        T.check(False, "a drain answered on a closed connection")
    except stexec.ConnectionLost:
        T.check(True, "the pending drain fails with ConnectionLost")
    c.forget_response(rid)
    try:
        await c.ping()
        T.check(False, "a closed client still answers")
    except stexec.ConnectionLost:
        T.check(True, "a closed client raises ConnectionLost")
    await asyncio.sleep(pydaemon.scaled(0.5))  # ticks go on meanwhile
    await c.reconnect(timeout=pydaemon.scaled(5))
    T.check(c.connected, "reconnected")
    async for n in c.notifications(timeout=WAIT, session_id=sid):
        got.append(n)
        if n.method == "turn_end":
            break
    T.eq([n.seq for n in got], list(range(before + 1,
                                          before + 1 + len(got))),
         "resumed stream: every seq once, in order")
    T.eq([n.params["data"]["tick"] for n in got if n.method == "progress"],
         [1, 2, 3, 4, 5, 6], "every tick once")
    T.eq([n.params["result"]["content"] for n in got
          if n.method == "tool_result"], ["ticked\n"], "the result once")

    # Another connection resumes from an explicit since: the same objects.
    last = c.last_seq(sid)
    async with aio.Client(c.path, timeout=WAIT) as c2:
        T.eq(await c2.subscribe(sid, since=before), last,
             "subscribe since on a second connection: lastSeq")
        again = [n async for n in c2.notifications(
            timeout=pydaemon.scaled(1), session_id=sid)]
        T.eq([n.params for n in again], [n.params for n in got],
             "replay with since on a second connection")


async def run_and_errors(c, sid):
    """Turn.run with a coroutine callback, discard, error codes."""
    turn = aio.Turn(c, sid)
    seen = []

    async def note(n):
        seen.append(n.method)
    out = await turn.run([{"type": "tool_use", "id": "f", "name": "bash",
                           "input": {"command": "echo four"}}], note)
    T.eq([(r["tool_use_id"], r["content"]) for r in out],
         [("f", "four\n")], "Turn.run results")
    T.check("turn_end" in seen, "Turn.run passed every notification")
    await c.add_tool(sid, "x", "bash", {"command": "sleep 30"})
    res = await c.discard(sid)
    T.eq(res, {"discardedTurn": 5, "turn": 6}, "discard")
    for call, code in ((c.call("noSuchMethod"), stexec.METHOD_NOT_FOUND),
                       (c.call("addTool", sessionId=sid),
                        stexec.INVALID_PARAMS),
                       (c.status("s-nope"), stexec.UNKNOWN_SESSION)):
        try:
            await call
            T.check(False, "an error call succeeded (%d)" % code)
        except StexecError as e:
            T.eq(e.code, code, "error code")
    info = await c.initialize("test_python_aio", "1")
    T.eq(info["protocolVersion"], 1, "initialize")
    pings = await asyncio.gather(*(c.ping() for _ in range(50)))
    T.eq(pings, [None] * 50, "50 concurrent requests")
    await c.close_session(sid)
    closed = [(n.method, n.session_id)
              async for n in c.notifications(timeout=pydaemon.scaled(2),
                                             session_id=sid)
              if n.method == "session_closed"]
    T.eq(closed, [("session_closed", sid)], "session_closed")


async def jobs_fake():
    """aio's job methods and JobOutput against tests/fakejobs.py
    (PROTOCOL.md §4, Jobs)."""
    f = fakejobs.FakeDaemon()
    sid = fakejobs.SESSION
    c = aio.Client(f.sock, timeout=WAIT)
    await c.connect()
    try:
        def last(method):
            return [p for m, p in f.requests if m == method][-1]
        job = f.add_job(tty=True)
        jid = job.info["jobId"]
        f.output(job, "hi\n")
        T.eq([j["jobId"] for j in await c.list_jobs(sid)], [jid],
             "aio list_jobs")
        r = await c.read_job(sid, jid, since=0, wait_ms=10)
        T.eq((r["text"], r["next"], r["status"]), ("hi\n", 3, "running"),
             "aio read_job")
        T.eq(await c.write_job(sid, jid, "x", eof=True), 1, "aio write_job")
        T.eq(last("writeJob"), {"sessionId": sid, "jobId": jid,
                                "data": "x", "eof": True}, "writeJob params")
        await c.resize_job(sid, jid, 90, 30)
        T.eq(job.size, (90, 30), "aio resize_job")
        f.streaming.add("toolu_1")
        T.eq(await c.write_stdin(sid, "toolu_1", "ab"), 2, "aio write_stdin")
        await c.signal_job(sid, jid, "kill")
        try:
            await c.signal_job(sid, jid, "kill")
            T.check(False, "signal_job of an ended job succeeded")
        except StexecError as e:
            T.eq(e.code, stexec.STATE_CONFLICT, "aio: the job has ended")
        # The iterator, while other requests go on on the same client.
        job = f.add_job()
        jid = job.info["jobId"]
        f.output(job, "a\n")
        f.later(0.1, f.output, job, "b\n")
        f.later(0.2, f.exit, job, 1)
        it = c.job_output(sid, jid, wait_ms=3000)
        got, pings = await asyncio.gather(
            _collect(it), asyncio.gather(*(c.ping() for _ in range(5))))
        T.eq(got, ["a\n", "b\n"], "aio job_output: every chunk")
        T.eq((it.last["status"], it.last["exitCode"]), ("exited", 1),
             "aio job_output: how it ended")
        T.check(all(isinstance(p.get("since"), int)
                    for p in f.reads_of(jid)), "aio reads name the offset")
    finally:
        await c.close()
        f.stop()


async def _collect(it):
    return [t async for t in it]


async def jobs_real(c):
    """A background job followed by aio's job_output, fed by write_job;
    skipped by a daemon without jobs."""
    echo = {"name": "echo", "background": True,
            "command": ["/bin/sh", "-c", "echo ready; exec cat"]}
    sid = await c.create_session(tools=[echo])
    try:
        try:
            await c.list_jobs(sid)
        except StexecError as e:
            if e.code != stexec.METHOD_NOT_FOUND:
                raise
            print("skip: this daemon has no jobs (listJobs: %s)" % e)
            return
        turn = aio.Turn(c, sid)
        await turn.run([{"id": "j1", "name": "echo", "input": {}}])
        job = stexec.job_of(turn.meta["j1"])
        T.check(job is not None, "the call became a job: %r" % turn.meta)
        if job is None:
            return
        jid = job["jobId"]
        text = ""
        wrote = False
        it = c.job_output(sid, jid, wait_ms=2000)
        async for chunk in it:
            text += chunk
            if not wrote and "ready\n" in text:
                wrote = True
                await c.write_job(sid, jid, "hello\n", eof=True)
        T.check(text.startswith("ready\n") and text.endswith("hello\n"),
                "aio job_output to the end: %r" % text)
        T.eq(it.last["status"], "exited", "aio: the job exited")
        jobs = await c.list_jobs(sid)
        T.eq([(j["jobId"], j["reason"]) for j in jobs], [(jid, "ok")],
             "aio list_jobs after the end")
    finally:
        await c.close_session(sid)


async def online(d):
    c = aio.Client(d.sock, timeout=WAIT)
    # The daemon may still be starting.
    await c.connect(timeout=pydaemon.scaled(10))
    async with c:
        sid = await turn_in_order(c, d.tmp)
        await interrupt_from_task(c, sid)
        await resume(c, sid)
        await run_and_errors(c, sid)
        await jobs_real(c)


def main():
    if os.environ.get("STEXEC_DAEMON"):
        asyncio.run(offline())
        asyncio.run(jobs_fake())
    return pydaemon.run(T, lambda d: asyncio.run(online(d)))


if __name__ == "__main__":
    sys.exit(main())
