"""
The real stexecd for the Python tests: started on a private socket in a
temporary directory, with a tag in its environment by which leftover tool
processes are found (tools inherit it, as in tests/e2e.c); and a counter of
checks that prints what failed.
"""
import json
import os
import shutil
import socket
import signal
import subprocess
import sys
import tempfile
import traceback


def scale():
    """The time rule (tests/README.md): the factor every duration a test
    chooses is multiplied by: $STEXEC_TEST_TIME_SCALE (tests/run sets it),
    else the build's (meson: 3 with a sanitizer, else 1)."""
    v = os.environ.get("STEXEC_TEST_TIME_SCALE") or \
        os.environ.get("STEXEC_TEST_BUILD_SCALE") or "1"
    f = float(v)
    if not 1 <= f <= 100:
        sys.exit("STEXEC_TEST_TIME_SCALE=%s: a factor from 1 to 100 was "
                 "expected" % v)
    return f


def scaled(seconds):
    """seconds (a guard, or a duration given to the daemon) times scale()."""
    return seconds * scale()


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL: " + what, file=sys.stderr, flush=True)
        return cond

    def eq(self, got, want, what):
        return self.check(got == want, "%s: got %r, want %r"
                          % (what, got, want))


class Conn:
    """A JSON-RPC client on the daemon's socket, one call at a time."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")
        self.rid = 0
        # Responses to other requests (sent raw) read meanwhile: kept.
        self.responses = {}

    def call(self, method, **params):
        """The whole response (result or error); notifications skipped, a
        response to another request kept in responses, never dropped."""
        self.rid += 1
        self.f.write((json.dumps({"jsonrpc": "2.0", "id": self.rid,
                                  "method": method, "params": params})
                      + "\n").encode())
        self.f.flush()
        while self.rid not in self.responses:
            msg = json.loads(self.f.readline())
            if "method" not in msg:
                self.responses[msg.get("id")] = msg
        return self.responses.pop(self.rid)

    def ok(self, method, **params):
        msg = self.call(method, **params)
        if "error" in msg:
            raise AssertionError("%s: %s" % (method, msg["error"]))
        return msg["result"]

    def close(self):
        self.f.close()
        self.s.close()


_next_id = [0]


def turn(c, sid, *uses):
    """Add the tool uses (name, input) as one turn, drain, and return
    [(result, meta)] in their order."""
    ids = []
    for name, inp in uses:
        _next_id[0] += 1
        ids.append("t%d" % _next_id[0])
        c.ok("addTool", sessionId=sid, toolUse={
            "id": ids[-1], "name": name, "input": inp})
    c.ok("drain", sessionId=sid)
    out = {}
    for n in c.ok("events", sessionId=sid)["notifications"]:
        if n["method"] == "tool_result":
            p = n["params"]
            out[p["toolUseId"]] = (p["result"], p["meta"])
    return [out[i] for i in ids]


class Daemon:
    def __init__(self, path, args=(), wrap=()):
        self.path = os.path.abspath(path)
        self.args = list(args)
        self.wrap = list(wrap)  # a command the daemon runs under (prlimit)
        self.tmp = tempfile.mkdtemp(prefix="stexec-py-")
        self.sock = os.path.join(self.tmp, "s.sock")
        self.tag = "py-%d-%s" % (os.getpid(), os.path.basename(self.tmp))
        self.proc = None

    def start(self):
        env = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                  "LISTEN_FDNAMES", "STEXEC_SOCKET", "JOURNAL_STREAM"):
            env.pop(k, None)
        env["STEXEC_E2E_TAG"] = self.tag
        self.log = open(os.path.join(self.tmp, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            self.wrap + [self.path, "--socket", self.sock,
             "--output-dir", os.path.join(self.tmp, "out"),
             "--state-dir", os.path.join(self.tmp, "state")] + self.args,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            cwd=self.tmp, env=env)

    def stop(self):
        """SIGTERM; the daemon's exit status (None if it had to be killed)."""
        try:
            if self.proc.poll() is not None:
                return self.proc.returncode
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=scaled(15))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        finally:
            self.log.close()

    def leftovers(self):
        """Pids of processes, other than the daemon and its running
        sentinel, that carry its tag (zombies are dead: they do not count)."""
        want = ("STEXEC_E2E_TAG=" + self.tag).encode()
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == self.proc.pid:
                continue
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if want not in f.read().split(b"\0"):
                        continue
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            comm = stat[stat.index(b"(") + 1:stat.rindex(b")")]
            state, ppid = stat[stat.rindex(b")") + 2:].split()[:2]
            if state == b"Z":
                continue
            if (comm == b"stexec-sentinel" and int(ppid) == self.proc.pid
                    and self.proc.poll() is None):
                continue
            out.append(int(name))
        return out

    def log_tail(self, n=30):
        try:
            with open(os.path.join(self.tmp, "daemon.log"), "rb") as f:
                return "\n".join(f.read().decode("utf-8", "replace")
                                 .splitlines()[-n:])
        except OSError:
            return ""


def run(T, body, args=()):
    """A test program's main: start the daemon of $STEXEC_DAEMON, run
    body(d) (an exception is a failed check; args go to the daemon), check that no tool process is
    left and that the daemon stops cleanly, print "N passed, M failed".
    Returns the exit status: 0, 1, or 77 (skipped) without $STEXEC_DAEMON."""
    path = os.environ.get("STEXEC_DAEMON")
    if not path:
        print("STEXEC_DAEMON is not set: skipped")
        return 77
    d = Daemon(path, args)
    d.start()
    ok = False
    try:
        try:
            body(d)
        except Exception:
            T.check(False, "raised:\n" + traceback.format_exc())
        T.eq(d.leftovers(), [], "no tool process is left")
        ok = True
    finally:
        rc = d.stop()
        if ok:
            T.eq(rc, 0, "the daemon's exit status after SIGTERM")
        if T.failed:
            print("daemon log (tail):\n" + d.log_tail(), file=sys.stderr)
        shutil.rmtree(d.tmp, ignore_errors=True)
    print("%d passed, %d failed" % (T.passed, T.failed))
    return 1 if T.failed else 0
