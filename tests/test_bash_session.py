#!/usr/bin/env python3
"""
bash_session against the real stexecd (doc/design.md §7, Shell sessions):
one live shell per session whose state carries from call to call, each
command delimited by markers nothing it prints can forge, a timeout that
interrupts the command and leaves the shell alive, the shell's end and
restart, a reload that carries the shell and the command in flight, a
crash that leaves no shell, the sandbox, and one shell per session. Raw
JSON-RPC, so that it tests the daemon, not a client.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_bash_session.py
"""
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pydaemon  # noqa: E402
from pydaemon import Checks, Conn, turn  # noqa: E402

T = Checks()


def sh(c, sid, command=None, **more):
    inp = dict(more)
    if command is not None:
        inp["command"] = command
    (res, meta), = turn(c, sid, ("bash_session", inp))
    return res


def wait_for_sock(d):
    # The event is the daemon listening; the guard only stops a hang.
    guard = time.monotonic() + pydaemon.scaled(120)
    while True:
        try:
            return Conn(d.sock)
        except OSError:
            if time.monotonic() > guard:
                raise AssertionError("the daemon does not listen")
            time.sleep(0.05)


def shell_pids(c, sid):
    return [j["pid"] for j in c.ok("listJobs", sessionId=sid)["jobs"]
            if j["name"] == "bash_session" and j["status"] == "running"]


def state(d):
    """cd, a function, an export and an alias carry to the next call."""
    c = Conn(d.sock)
    work = tempfile.mkdtemp(prefix="bs-", dir=d.tmp)
    os.mkdir(os.path.join(work, "sub"))
    sid = c.ok("createSession", cwd=work)["sessionId"]
    r = sh(c, sid, "cd sub && export GREET=hello && "
           "f() { echo \"fn $1\"; } && alias ll='echo aliased'")
    T.eq((r["is_error"], r["content"]), (False, ""), "the first call")
    r = sh(c, sid, "pwd")
    T.eq(r["content"], os.path.join(work, "sub") + "\n",
         "cd carries to the next call")
    r = sh(c, sid, "f x; echo $GREET; sh -c 'echo child $GREET'; ll")
    T.eq(r["content"], "fn x\nhello\nchild hello\naliased\n",
         "a function, an export and an alias carry")
    r = sh(c, sid, "echo out; echo err >&2; exit_code() { return 3; }; "
           "exit_code")
    T.eq(r["is_error"], True, "a non-zero status is an error")
    T.eq(r["content"], "out\nerr\nExit code 3",
         "stdout and stderr as the shell gives them, then the status")
    T.eq(len(shell_pids(c, sid)), 1, "one shell, a job of the session")
    # Calls of one turn run one after the other in the same shell.
    got = turn(c, sid, ("bash_session", {"command": "Y=1; cd .."}),
               ("bash_session", {"command": "echo $Y; pwd"}),
               ("bash_session", {"command": "echo $((Y+1))"}))
    T.eq([r["content"] for r, m in got], ["", "1\n" + work + "\n", "2\n"],
         "three calls in one turn")
    c.ok("closeSession", sessionId=sid)
    c.close()


def markers(d):
    """Marker-shaped text, an old marker and output without a newline do
    not confuse the delimiting; stdin reads do not eat the next call."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    # The raw terminal output holds the markers: the job's ring has them.
    sh(c, sid, "echo one")
    raw = c.ok("readJob", sessionId=sid, jobId=c.ok(
        "listJobs", sessionId=sid)["jobs"][0]["jobId"], since=0)["text"]
    old = [ln for ln in raw.split("\n") if ln.endswith("e:0")]
    T.eq(len(old), 1, "the raw output holds one end marker: %r" % raw)
    old = old[0] if old else "x" * 32 + "e:0"
    r = sh(c, sid, "printf '%s\\n' '" + old + "'; echo after")
    T.eq(r["content"], old + "\nafter\n", "an old end marker is output")
    start = old[:32] + "s"
    r = sh(c, sid, "printf '%s\\n%s\\n' '" + start + "' '" + old + "'")
    T.eq(r["content"], start + "\n" + old + "\n",
         "an old start marker is output too")
    r = sh(c, sid, "printf '\\n%s%s:%d\\n' 0123456789abcdef "
           "0123456789abcdefe 0")
    T.eq(r["content"], "\n0123456789abcdef0123456789abcdefe:0\n",
         "marker-shaped text is output")
    r = sh(c, sid, "printf 'no newline'")
    T.eq(r["content"], "no newline", "output without a trailing newline")
    r = sh(c, sid, "printf 'a\\nb'; printf ''")
    T.eq(r["content"], "a\nb", "nor in the middle of the output")
    r = sh(c, sid, "cat; read x; echo \"read $?\"")
    T.eq(r["content"], "read 1\n", "stdin is /dev/null")
    r = sh(c, sid, "echo next")
    T.eq(r["content"], "next\n", "the next call is whole")
    r = sh(c, sid, "cat <<'EOF'\nSTEXEC_x\nEOF\necho \"$((6*7))\" '$HOME'")
    T.eq(r["content"], "STEXEC_x\n42 $HOME\n",
         "a here-document and quotes in the command")
    r = sh(c, sid, "seq 1 15000")
    T.eq(r["content"].count("\n"), 15000, "big output in order")
    T.check(r["content"].startswith("1\n2\n") and
            r["content"].endswith("\n15000\n"), "big output whole")
    r = sh(c, sid, "head -c 300000 /dev/zero | tr '\\0' x")
    T.check("output truncated: 300000 bytes in total" in r["content"],
            "output beyond the cap is cut: %r" % r["content"][-300:])
    T.check(r["content"].startswith("x" * 50000) and
            r["content"].endswith("x" * 50000),
            "its head and tail are kept")
    c.ok("closeSession", sessionId=sid)
    c.close()


def timeout(d):
    """A command past its timeout is interrupted; the shell lives on."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    sh(c, sid, "export KEPT=yes")
    pid = shell_pids(c, sid)
    # Its timeout and its sleep scale together (tests/README.md).
    r = sh(c, sid, "echo started; sleep %d; echo not-reached"
           % pydaemon.scaled(5), timeout=int(pydaemon.scaled(1000)))
    T.eq(r["is_error"], True, "a timeout is an error")
    T.check(r["content"].startswith("started\n"), "the output so far: %r"
            % r["content"])
    T.check("not-reached" not in r["content"], "the command stopped")
    T.check("timed out" in r["content"] and "lives on" in r["content"],
            "it says it timed out and the shell lives: %r" % r["content"])
    r = sh(c, sid, "echo $KEPT")
    T.eq(r["content"], "yes\n", "the next call still sees the export")
    T.eq(shell_pids(c, sid), pid, "the same shell")
    # A command that ignores SIGINT is killed harder.
    r = sh(c, sid, "trap '' INT; sleep 30", timeout=int(pydaemon.scaled(500)))
    T.check("timed out" in r["content"], "SIGINT ignored: timed out: %r"
            % r["content"])
    r = sh(c, sid, "trap : INT; echo $KEPT")
    T.eq(r["content"], "yes\n", "and the shell lives on")
    # A loop of builtins in the shell itself: SIGINT runs the trap and
    # the loop goes on; the shell never comes back and is killed.
    r = sh(c, sid, "while :; do :; done", timeout=int(pydaemon.scaled(300)))
    T.check("timed out" in r["content"] and "killed" in r["content"] and
            "restart" in r["content"], "a shell that does not come back: %r"
            % r["content"])
    job, = [j for j in c.ok("listJobs", sessionId=sid)["jobs"]
            if j["name"] == "bash_session"]
    end = job["outputBytes"]
    while job["status"] == "running":
        r = c.ok("readJob", sessionId=sid, jobId=job["jobId"], since=end,
                 waitMs=10000)
        end = r["next"]
        job["status"] = r["status"]
    T.eq(job["status"], "killed", "it was killed")
    r = sh(c, sid, "echo $KEPT")
    T.check(r["is_error"] and "restart" in r["content"],
            "the next call says to restart: %r" % r["content"])
    c.ok("closeSession", sessionId=sid)
    c.close()


def exit_restart(d):
    """exit ends the shell; calls say so until restart: true."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    sh(c, sid, "g() { echo g; }; g")
    r = sh(c, sid, "echo bye; exit 4")
    T.eq(r["is_error"], True, "exit 4 is an error")
    T.check(r["content"].startswith("bye\n") and "exited with status 4"
            in r["content"] and "restart" in r["content"],
            "the result says the shell ended: %r" % r["content"])
    r = sh(c, sid, "echo hi")
    T.eq(r["is_error"], True, "a call to the ended shell is an error")
    T.check("ended" in r["content"] and "\"restart\": true" in
            r["content"], "it says to pass restart: %r" % r["content"])
    r = sh(c, sid, "type g || echo gone", restart=True)
    T.eq(r["is_error"], False, "restart with a command: %r" % r["content"])
    T.check(r["content"].endswith("gone\n"),
            "a fresh shell: the function is gone: %r" % r["content"])
    sh(c, sid, "export X=1")
    r = sh(c, sid, restart=True)
    T.eq(r["is_error"], False, "restart alone: %r" % r["content"])
    T.check("restarted" in r["content"], "it says so: %r" % r["content"])
    r = sh(c, sid, "echo \"[$X]\"")
    T.eq(r["content"], "[]\n", "restart alone gave a fresh shell")
    r = sh(c, sid)
    T.eq(r["is_error"], True, "neither command nor restart: an error")
    c.ok("closeSession", sessionId=sid)
    T.eq(d.leftovers(), [], "closing the session ends its shell")
    c.close()


def sessions(d):
    """Two sessions have separate shells."""
    c = Conn(d.sock)
    a = c.ok("createSession")["sessionId"]
    b = c.ok("createSession")["sessionId"]
    sh(c, a, "V=a")
    sh(c, b, "V=b")
    T.eq((sh(c, a, "echo $V")["content"], sh(c, b, "echo $V")["content"]),
         ("a\n", "b\n"), "each session its own shell")
    T.check(shell_pids(c, a) != shell_pids(c, b), "two processes")
    c.ok("closeSession", sessionId=a)
    c.ok("closeSession", sessionId=b)
    c.close()


def sandboxed(d):
    """A read-only session's shell cannot write."""
    c = Conn(d.sock)
    work = tempfile.mkdtemp(prefix="bs-ro-", dir=d.tmp)
    sid = c.ok("createSession", cwd=work, sandbox={"mode": "read-only"})[
        "sessionId"]
    r = sh(c, sid, "echo x > f")
    T.eq(r["is_error"], True, "a write in a read-only sandbox fails: %r"
         % r["content"])
    T.check(not os.path.exists(os.path.join(work, "f")), "nothing written")
    r = sh(c, sid, "echo still")
    T.eq(r["content"], "still\n", "the shell lives on")
    c.ok("closeSession", sessionId=sid)
    c.close()


def new_image(c, before):
    guard = time.monotonic() + pydaemon.scaled(120)
    while True:
        now = c.ok("initialize")["server"].get("instance")
        if now != before:
            return now
        if time.monotonic() > guard:
            raise AssertionError("no new image")
        time.sleep(0.05)


def reload(d):
    """A reload carries the shell, its state, and the command in flight."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    sh(c, sid, "export KEEP=kept; cd /")
    pid = shell_pids(c, sid)
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(c, before)
    T.eq(shell_pids(c, sid), pid, "the same shell after the reload")
    r = sh(c, sid, "echo $KEEP; pwd")
    T.eq(r["content"], "kept\n/\n", "its export and cwd are kept")
    # A command in flight at the reload finishes in the new image: it
    # waits on a FIFO that is written only after the reload.
    fifo = os.path.join(tempfile.mkdtemp(prefix="bs-fifo-", dir=d.tmp), "p")
    os.mkfifo(fifo)
    c.ok("addTool", sessionId=sid, toolUse={
        "id": "fl", "name": "bash_session", "input": {
            "command": "echo before; cat " + fifo + "; echo after $KEEP"}})
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    new_image(c, before)
    with open(fifo, "w") as f:
        f.write("mid\n")
    c.ok("drain", sessionId=sid)
    got = [n["params"]["result"] for n in c.ok("events", sessionId=sid)[
        "notifications"] if n["method"] == "tool_result" and
        n["params"]["toolUseId"] == "fl"]
    T.eq([(g["is_error"], g["content"]) for g in got],
         [(False, "before\nmid\nafter kept\n")],
         "the command in flight is answered once, whole, after the reload")
    T.eq(sh(c, sid, "echo ok")["content"], "ok\n", "the shell goes on")
    c.ok("closeSession", sessionId=sid)
    c.close()


def crash(d):
    """A crash of the daemon leaves no shell behind."""
    c = Conn(d.sock)
    sid = c.ok("createSession")["sessionId"]
    sh(c, sid, "sleep 300 & echo started")
    T.check(len(shell_pids(c, sid)) == 1, "the shell runs")
    T.check(d.leftovers() != [], "its processes are there")
    c.close()
    d.proc.kill()
    d.proc.wait()
    d.log.close()
    d.start()
    c = wait_for_sock(d)
    T.eq(d.leftovers(), [], "no shell process survives the crash")
    T.eq(c.ok("listJobs", sessionId=sid)["jobs"], [], "nor its job")
    c.ok("closeSession", sessionId=sid)
    c.close()


def listed(d):
    c = Conn(d.sock)
    tools = {t["name"]: t for t in c.ok("listTools")["tools"]}
    t = tools.get("bash_session", {})
    T.eq((t.get("internal"), t.get("concurrencySafe")), ("shell", False),
         "bash_session is a built-in the daemon answers, run alone")
    T.check("restart" in t.get("description", ""), "its description")
    c.close()


def body(d):
    wait_for_sock(d).close()
    for test in (listed, state, markers, timeout, exit_restart, sessions,
                 sandboxed, reload, crash):
        test(d)


if __name__ == "__main__":
    sys.exit(pydaemon.run(T, body))
