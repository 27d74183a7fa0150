#!/usr/bin/env python3
"""stexecd under systemd's protocols, without systemd as PID 1.

systemd-socket-activate hands the daemon its listening socket; a datagram
socket stands in for NOTIFY_SOCKET and records what the daemon tells the
service manager; systemd-analyze verifies the unit files. Exit 77: skipped.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pydaemon import scaled  # noqa: E402

DAEMON = os.environ.get("STEXEC_DAEMON")
CLI = os.environ.get("STEXEC_CLI")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ACTIVATE = "/usr/bin/systemd-socket-activate"
SYSTEMD_VARS = ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
                "WATCHDOG_PID", "WATCHDOG_USEC", "JOURNAL_STREAM",
                "INVOCATION_ID")
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


class Conn:
    def __init__(self, path, timeout=10):
        deadline = time.time() + scaled(timeout)
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.time() > deadline:
                    raise
                time.sleep(0.02)
        self.f = self.s.makefile("rwb")
        self.id = 0

    def call(self, method, **params):
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method,
               "params": params}
        self.f.write((json.dumps(msg) + "\n").encode())
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError(f"connection closed waiting for {method}")
            reply = json.loads(line)
            if reply.get("id") == self.id:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply["result"]

    def close(self):
        self.f.close()
        self.s.close()


class Notify:
    """A NOTIFY_SOCKET: collects the datagrams the daemon sends."""

    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        self.s.settimeout(0.1)
        self.got = []

    def drain(self):
        while True:
            try:
                self.got.extend(self.s.recv(4096).decode().split("\n"))
            except socket.timeout:
                return

    def wait(self, prefix, timeout=10):
        deadline = time.time() + scaled(timeout)
        while time.time() < deadline:
            self.drain()
            if any(m.startswith(prefix) for m in self.got):
                return True
        return False


def activate(tmp, env, args, datagram=False):
    sock = os.path.join(tmp, "d.sock" if datagram else "s.sock")
    cmd = [ACTIVATE, "-l", sock]
    if datagram:
        cmd.append("-d")
    for k, v in env.items():
        cmd += ["-E", f"{k}={v}"]
    cmd += [DAEMON, "--output-dir", os.path.join(tmp, "out"),
            "--state-dir", os.path.join(tmp, "state")] + args
    err = open(os.path.join(tmp, "stderr.log"), "wb")
    proc = subprocess.Popen(cmd, stderr=err)
    deadline = time.time() + scaled(10)
    while not os.path.exists(sock) and time.time() < deadline:
        time.sleep(0.01)
    return proc, sock


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=scaled(20))
    except subprocess.TimeoutExpired:
        proc.kill()
        return -1


def test_activation_and_notify():
    with tempfile.TemporaryDirectory() as tmp:
        notify = Notify(os.path.join(tmp, "notify.sock"))
        err_path = os.path.join(tmp, "stderr.log")
        open(err_path, "wb").close()
        st = os.stat(err_path)
        env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000",
               "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        proc, sock = activate(tmp, env, ["--log-level", "info"])
        c = Conn(sock)
        check("activated daemon answers", c.call("ping") == {})
        sid = c.call("createSession")["sessionId"]
        c.call("addTool", sessionId=sid,
               toolUse={"id": "e", "name": "bash", "input": {"command": "env"}})
        c.call("subscribe", sessionId=sid, since=0)
        drained = c.call("drain", sessionId=sid)
        check("drain of the env tool", drained["results"] == 1)
        ev = c.call("events", sessionId=sid, since=0)
        content = [n["params"]["result"]["content"] for n in ev["notifications"]
                   if n["method"] == "tool_result"][0]
        leaked = [v for v in SYSTEMD_VARS if f"\n{v}=" in "\n" + content]
        check("no systemd variable reaches a tool", not leaked, str(leaked))
        check("the tool got STEXEC_SESSION_ID",
              f"STEXEC_SESSION_ID={sid}" in content)
        check("READY=1 sent", notify.wait("READY=1"), str(notify.got))
        check("STATUS= sent", notify.wait("STATUS="), str(notify.got))
        check("WATCHDOG=1 sent", notify.wait("WATCHDOG=1", 3), str(notify.got))
        c.call("closeSession", sessionId=sid)
        c.close()
        rc = stop(proc)
        check("exit 0 on SIGTERM", rc == 0, f"rc={rc}")
        check("STOPPING=1 sent", notify.wait("STOPPING=1", 2), str(notify.got))
        # What follows "Execing" is the daemon's (the rest is the tool's).
        log = open(err_path).read().split("\n")
        ours = [ln for ln in log[[i for i, ln in enumerate(log)
                                  if ln.startswith("Execing")][0] + 1:] if ln]
        check("journal priorities on stderr",
              ours and all(ln[0] == "<" and ln[2] == ">" for ln in ours),
              repr(ours[:5]))


def test_idle_exit():
    with tempfile.TemporaryDirectory() as tmp:
        proc, sock = activate(tmp, {}, ["--idle-exit", "1"])
        c = Conn(sock)
        sid = c.call("createSession")["sessionId"]
        time.sleep(2.5)
        check("no idle exit while a session is open", proc.poll() is None)
        c.call("closeSession", sessionId=sid)
        c.close()
        try:
            rc = proc.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = -1
        check("idle exit once nothing is open", rc == 0, f"rc={rc}")


def test_wrong_socket_type_falls_back():
    with tempfile.TemporaryDirectory() as tmp:
        own = os.path.join(tmp, "own.sock")
        proc, dsock = activate(tmp, {}, ["--socket", own], datagram=True)
        # A datagram makes systemd-socket-activate start the daemon.
        d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        d.sendto(b"x", dsock)
        c = Conn(own)
        check("a datagram socket is refused; own socket serves",
              c.call("ping") == {})
        c.close()
        rc = stop(proc)
        log = open(os.path.join(tmp, "stderr.log")).read()
        check("the refusal is logged", "not a listening Unix stream" in log,
              log[:300])
        check("exit 0 after fallback", rc == 0, f"rc={rc}")


def test_units_verify():
    units = os.path.join(SRC, "systemd")
    bindir = os.path.dirname(DAEMON)
    sets = [("--system", ("stexecd.service", "stexecd.socket")),
            ("--user", ("stexecd-user.service", "stexecd-user.socket"))]
    # The metrics example runs stexec-cli, which the build keeps elsewhere.
    if CLI:
        sets.append(("--system", ("stexec-metrics.service",
                                  "stexec-metrics.timer")))
    for mode, names in sets:
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name in names:
                src = os.path.join(units, name)
                if not os.path.exists(src):
                    src += ".in"
                text = open(src).read().replace(
                    "@bindir@/stexec-cli", CLI or "").replace(
                    "@bindir@", bindir)
                # Installed under the name without "-user".
                dst = os.path.join(tmp, name.replace("-user", ""))
                open(dst, "w").write(text)
                paths.append(dst)
            r = subprocess.run(["systemd-analyze", mode, "verify"] + paths,
                               capture_output=True, text=True,
                               env=dict(os.environ, SYSTEMD_LOG_LEVEL="info",
                                        XDG_RUNTIME_DIR=tmp))
            out = (r.stdout + r.stderr).strip()
            check(f"systemd-analyze {mode} verify is silent",
                  r.returncode == 0 and out == "", out)


def main():
    if not DAEMON or not os.path.exists(ACTIVATE):
        print("skipped: needs STEXEC_DAEMON and systemd-socket-activate")
        return 77
    for t in (test_activation_and_notify, test_idle_exit,
              test_wrong_socket_type_falls_back, test_units_verify):
        try:
            t()
        except Exception as e:  # a test that blows up is a failure
            check(t.__name__, False, repr(e))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
