#!/usr/bin/env python3
"""
The network proxy's bounds, from inside real tools (doc/design.md §7):
each case runs a tool under an allow-list, so that its connections go
through its own network namespace to its proxy port ($HTTP_PROXY), in a
network namespace of the test's own (tests/net/netns.py; exit 77 when
none can be made, or when the daemon cannot enforce allow-lists).

- 70 connections that send nothing: 64 held and served, 6 closed at once,
  and counted refused in the log and the metrics;
- a head over 16 KiB gets 431; half a head is closed at its deadline; a
  name that is not UTF-8 is tallied in valid UTF-8;
- a 64 MiB download read slowly through a tunnel: the daemon's peak RSS
  (VmHWM, reset by clear_refs) grows far less than the body;
- a tunnel whose tool end outlives the tool (its descriptor taken by the
  test): the server sees it closed once the tool's result is out;
- five tools of one session at once, 64 tunnels each: 256 held, 64
  closed at once;
- a daemon with 306 descriptors: the proxy holds 20 connections of all
  tools (half of what --max-procs leaves, six a connection), closes the
  rest at once, and still serves clients.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_network_bounds.py
"""
import os
import shutil
import socket
import socketserver
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "net"))

import netns  # noqa: E402
import pydaemon  # noqa: E402
import test_network as tn  # noqa: E402
from test_network import T, Conn, case  # noqa: E402

PY = tn.PY
WWW = netns.SITES["www.test"]
BODY = 64 << 20
# What the proxy may hold for one tunnel is 2 x 256 KiB each way: the
# bound leaves room for the allocator and the daemon's other work.
RSS_GROWTH_MAX = 16 << 20


class Fx:
    """What test_network's helpers need of its fixtures."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="stexec-netb-")
        os.chmod(self.tmp, 0o755)
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)
        self.hosts = netns.setup(self.tmp)

    def env(self, base=None):
        return {"HOME": self.home, "PYTHONDONTWRITEBYTECODE": "1"}

    def cwd(self):
        return tempfile.mkdtemp(dir=self.tmp, prefix="cwd-")

    def script(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(PRELUDE + text)
        return "%s %s" % (PY, path)


# Every tool script starts with its proxy's port and a way to read a head.
PRELUDE = r"""
import os, socket, sys, time
PORT = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
def proxy():
    return socket.create_connection(("127.0.0.1", PORT))
def head(s):
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("closed before a head: %r" % got)
        got += chunk
    h, _, rest = got.partition(b"\r\n\r\n")
    return h, rest
def read_all(s):
    got = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return got + b"[reset]"
        if not chunk:
            return got
        got += chunk
"""


def refused_total(c):
    for fam in c.ok("metrics")["metrics"]:
        if fam["name"] == "stexec_network_connections_refused_total":
            return sum(s["value"] for s in fam["samples"])
        if fam["name"] == "stexec_network_connections_total":
            return sum(s["value"] for s in fam["samples"]
                       if (s.get("labels") or {}).get("outcome") ==
                       "refused")
    return None


def daemon_log(d):
    with open(os.path.join(d.tmp, "daemon.log"), "rb") as f:
        return f.read().decode("utf-8", "replace")


# --- 64 per tool -------------------------------------------------------

# A tool's connections, n opened at once: the first held ones are the
# bound's (accepted in order), the rest over it; each held one is served.
OVER_BOUND = r"""
import select
n, held = %d, %d
socks = [proxy() for _ in range(n)]
late = 0
for s in socks[held:]:
    late += read_all(s) in (b"", b"[reset]")
print("closed at once:", late)
ready, _, _ = select.select(socks[:held], [], [], 0)
print("held:", held - len(ready))
for s in socks[:held]:
    s.sendall(b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
served = sum(b" 403 " in read_all(s).split(b"\r\n")[0] for s in socks[:held])
print("served:", served)
"""


def many_connections(d, fx):
    with case("70 connections: 64 held and served, 6 closed at once"):
        c = Conn(d.sock)
        sid = tn.session(c, fx, {"allow": ["www.test"]})
        before = refused_total(c)
        (out, meta), = tn.run_tools(c, sid, [
            fx.script("many.py", OVER_BOUND % (70, 64))])
        T.check("closed at once: 6" in out, "the 6 over the bound read EOF "
                "at once: " + out)
        T.check("held: 64" in out, "the first 64 are held open: " + out)
        T.check("served: 64" in out, "each of the 64 is served (a 403 "
                "for evil.test): " + out)
        after = refused_total(c)
        T.check(before is not None, "the metrics count refused "
                "connections")
        if before is not None:
            T.eq(after - before, 6 + 64, "refused connections counted: "
                 "6 over the bound, 64 for evil.test")
        log = daemon_log(d)
        T.eq(log.count("network: a connection refused: 64 open of at most "
                       "64 for the tool"), 1,
             "one log line for the tool's connections over its bound")
        T.check("network: 6 connections in all were refused over a "
                "connection bound" in log, "their count when it ends")
        T.check([(e["host"], e["port"], e["connections"]) for e in
                 (meta.get("network") or {}).get("refused", [])] ==
                [("evil.test", 443, 64)], "meta.network.refused: %r"
                % meta.get("network"))
        c.ok("closeSession", sessionId=sid)
        c.close()


# --- heads -------------------------------------------------------------

BIG_HEAD = r"""
s = proxy()
s.sendall(b"GET http://www.test/ HTTP/1.1\r\nX-Pad: " + b"p" * 17000 +
          b"\r\n\r\n")
print("reply:", read_all(s).split(b"\r\n")[0].decode())
"""

HALF_HEAD = r"""
s = proxy()
s.sendall(b"GET http://www.test/ HTTP/1.1\r\nX-A: 1\r\n")
print("closed after %d bytes" % len(read_all(s)))
"""

NOT_UTF8 = r"""
s = proxy()
s.sendall(b"CONNECT \xff\xfe.test:443 HTTP/1.1\r\n\r\n")
print("reply:", read_all(s).split(b"\r\n")[0].decode())
"""


def heads(d, fx):
    with case("a head over 16 KiB gets 431, half a head is closed at its "
              "deadline, a name not in UTF-8 is tallied in UTF-8"):
        c = Conn(d.sock)
        sid = tn.session(c, fx, {"allow": ["www.test"]})
        hits = len(WORLD[0].hits)
        big, half, bad = tn.run_tools(c, sid, [
            fx.script("big.py", BIG_HEAD), fx.script("half.py", HALF_HEAD),
            fx.script("bad.py", NOT_UTF8)])
        T.check("reply: HTTP/1.1 431 " in big[0], "431: " + big[0])
        T.check("closed after 0 bytes" in half[0], "half a head: the proxy "
                "closes it without a reply: " + half[0])
        T.eq(len(WORLD[0].hits) - hits, 0, "requests that reached www.test")
        T.check("reply: HTTP/1.1 403 " in bad[0], "403: " + bad[0])
        refused = (bad[1].get("network") or {}).get("refused", [])
        T.check([(e["host"], e["port"]) for e in refused] ==
                [("\ufffd\ufffd.test", 443)], "meta.network.refused names "
                "the host in valid UTF-8: %r" % bad[1].get("network"))
        c.ok("closeSession", sessionId=sid)
        c.close()


# --- backpressure ------------------------------------------------------

class Stream(socketserver.BaseRequestHandler):
    """BODY bytes to whoever connects, then close."""

    def handle(self):
        block = bytes(1 << 20)
        for _ in range(BODY // len(block)):
            self.request.sendall(block)


SLOW = r"""
s = proxy()
s.sendall(b"CONNECT www.test:%d HTTP/1.1\r\n\r\n")
h, rest = head(s)
assert b" 200 " in h.split(b"\r\n")[0], h
total = len(rest)
# A slow reader: the proxy must stop reading the server, not buffer it.
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    total += len(chunk)
    time.sleep(0.002)
print("got %%d bytes" %% total)
"""


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def backpressure(d, fx):
    with case("a slow reader of 64 MiB: the daemon's memory stays bounded"):
        srv = serve(Stream)
        port = srv.server_address[1]
        c = Conn(d.sock)
        sid = tn.session(c, fx, {"allow": ["www.test:%d" % port]})
        pid = d.proc.pid
        # VmHWM from here on: the peak of this transfer.
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5\n")
        base = status_kb(pid, "VmRSS")
        (out, meta), = tn.run_tools(c, sid, [fx.script(
            "slow.py", SLOW % port)])
        peak = status_kb(pid, "VmHWM")
        T.check("got %d bytes" % BODY in out, "the whole body arrives: "
                + out)
        T.check(peak - base < RSS_GROWTH_MAX, "the daemon's RSS grew by "
                "%d KiB relaying %d MiB to a slow reader (at most %d KiB)"
                % ((peak - base) >> 10, BODY >> 20, RSS_GROWTH_MAX >> 10))
        reached = (meta.get("network") or {}).get("reached", [])
        T.check([(e["host"], e["bytesIn"] >= BODY) for e in reached] ==
                [("www.test", True)], "meta.network.reached counts the "
                "body: %r" % reached)
        c.ok("closeSession", sessionId=sid)
        c.close()
        srv.shutdown()
        srv.server_close()


# --- the tool's end closes its tunnels ---------------------------------

class Hold(socketserver.StreamRequestHandler):
    """Echoes one line, then reads until its client is gone."""

    def handle(self):
        self.wfile.write(self.rfile.readline())
        while self.rfile.read(1):
            pass
        self.server.closed.set()


HAND_OVER = r"""
import json
s = proxy()
s.sendall(b"CONNECT www.test:%d HTTP/1.1\r\n\r\n")
h, rest = head(s)
assert b" 200 " in h.split(b"\r\n")[0], h
s.sendall(b"ping\n")
got = rest
while not got.endswith(b"\n"):
    got += s.recv(100)
os.write(3, (json.dumps({"progress": {"fd": s.fileno()}}) + "\n").encode())
while not os.path.exists(%r):
    time.sleep(0.01)
print("echoed %%s" %% got.strip().decode())
"""


def take_fd(tag, fd):
    """The tool's descriptor fd, duplicated into this process (root may:
    pidfd_getfd), from the process that runs hand.py; None if none."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if ("STEXEC_E2E_TAG=" + tag).encode() not in \
                        f.read().split(b"\0"):
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if b"hand.py" not in f.read():
                    continue
        except OSError:
            continue
        pidfd = os.pidfd_open(int(name))
        # pidfd_getfd(2), x86_64's number: Python has no wrapper.
        got = libc.syscall(438, pidfd, fd, 0)
        os.close(pidfd)
        if got >= 0:
            return socket.socket(fileno=got)
    return None


def tool_end(d, fx):
    with case("a tunnel the tool's end outlives is closed when the tool "
              "ends"):
        srv = serve(Hold)
        srv.closed = threading.Event()
        port = srv.server_address[1]
        go = os.path.join(fx.tmp, "go-hand")
        c = Conn(d.sock)
        sid = tn.session(c, fx, {"allow": ["www.test:%d" % port]})
        tn.NEXT[0] += 1
        c.ok("addTool", sessionId=sid, toolUse={
            "id": "n%d" % tn.NEXT[0], "name": "sh",
            "input": {"cmd": fx.script("hand.py", HAND_OVER % (port, go))}})
        fd = None
        guard = time.monotonic() + pydaemon.scaled(120)
        while fd is None and time.monotonic() < guard:
            for n in c.ok("events", sessionId=sid)["notifications"]:
                if n["method"] == "progress":
                    fd = n["params"]["data"]["fd"]
                if n["method"] == "tool_result":
                    fd = -1
                    T.check(False, "the tool ended early: %r" % n["params"])
            time.sleep(0.02)
        fd = -1 if fd is None else fd
        try:
            held = take_fd(d.tag, fd) if fd >= 0 else None
        finally:
            open(go, "w").close()
        T.check(held is not None, "the tool's end of the tunnel is taken")
        c.ok("drain", sessionId=sid)
        res = [n["params"] for n in c.ok("events", sessionId=sid)[
            "notifications"] if n["method"] == "tool_result"]
        T.check(len(res) == 1 and "echoed ping" in res[0]["result"][
            "content"], "the tool echoed through its tunnel: %r" % res)
        # The tool is over, its end of the tunnel still open here: the
        # daemon must close the upstream (guarded, not timed).
        T.check(srv.closed.wait(120), "the server sees the tunnel closed")
        if held is not None:
            held.settimeout(pydaemon.scaled(120))
            T.eq(held.recv(10), b"", "the tool's end reads EOF")
            held.close()
        c.ok("closeSession", sessionId=sid)
        c.close()
        srv.shutdown()
        srv.server_close()


# --- 256 per session ---------------------------------------------------

SESSION_TOOL = r"""
import json
socks = [proxy() for _ in range(64)]
for s in socks:
    s.sendall(b"CONNECT www.test:%d HTTP/1.1\r\n\r\n")
tunnels = closed = 0
for s in socks:
    got = b""
    while b"\r\n\r\n" not in got:
        try:
            chunk = s.recv(4096)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            break
        got += chunk
    if b" 200 " in got.split(b"\r\n")[0]:
        tunnels += 1
    elif got == b"":
        closed += 1
os.write(3, (json.dumps({"progress": "counted"}) + "\n").encode())
# Every tool holds its tunnels until all have counted.
while not os.path.exists(%r):
    time.sleep(0.01)
print("tunnels %%d closed %%d" %% (tunnels, closed))
"""


def session_bound(d, fx):
    with case("five tools of one session: 256 tunnels held, 64 closed"):
        srv = serve(Hold)
        srv.closed = threading.Event()
        port = srv.server_address[1]
        go = os.path.join(fx.tmp, "go-session")
        c = Conn(d.sock)
        sh = tn.tooldef(fx, {"allow": ["www.test:%d" % port]}, "par")
        sh["concurrencySafe"] = True
        sid = tn.session(c, fx, {"allow": ["www.test:%d" % port]}, [sh])
        cmd = fx.script("session.py", SESSION_TOOL % (port, go))
        for i in range(5):
            tn.NEXT[0] += 1
            c.ok("addTool", sessionId=sid, toolUse={
                "id": "n%d" % tn.NEXT[0], "name": "par",
                "input": {"cmd": cmd}})
        counted = 0
        guard = time.monotonic() + pydaemon.scaled(120)
        try:
            while counted < 5 and time.monotonic() < guard:
                counted = sum(n["method"] == "progress" for n in c.ok(
                    "events", sessionId=sid)["notifications"])
                time.sleep(0.02)
        finally:
            open(go, "w").close()
        c.ok("drain", sessionId=sid)
        outs = [n["params"]["result"]["content"] for n in c.ok(
            "events", sessionId=sid)["notifications"]
            if n["method"] == "tool_result"]
        tunnels = closed = 0
        for out in outs:
            words = out.split()
            if "tunnels" in words and "closed" in words:
                tunnels += int(words[words.index("tunnels") + 1])
                closed += int(words[words.index("closed") + 1])
        T.eq((len(outs), tunnels, closed), (5, 256, 64),
             "(results, tunnels held, connections closed at once): %r"
             % outs)
        c.ok("closeSession", sessionId=sid)
        c.close()
        srv.shutdown()
        srv.server_close()


# --- the daemon's descriptors -----------------------------------------

# 306 descriptors, 2 tools: 240 left (see connection_cap), half for the
# proxy at six a connection.
FEW_FDS = 306
DAEMON_CAP = 20


def daemon_bound(path, fx):
    with case("306 descriptors: 20 connections of all tools, the rest "
              "closed at once"):
        d = tn.start(path, ["--network-hosts", fx.hosts, "--max-procs",
                            "2"], ["prlimit", "--nofile=%d:%d" %
                                   (FEW_FDS, FEW_FDS), "--"])
        T.check(d is not None, "the daemon starts with 306 descriptors")
        if d is None:
            return
        try:
            c = Conn(d.sock)
            sid = tn.session(c, fx, {"allow": ["www.test"]})
            (out, meta), = tn.run_tools(c, sid, [
                fx.script("few.py", OVER_BOUND % (30, DAEMON_CAP))])
            T.check("closed at once: 10" in out, "the 10 over the "
                    "daemon's bound read EOF at once: " + out)
            T.check("held: 20" in out and "served: 20" in out,
                    "the first 20 are held and served: " + out)
            T.check("%d for the daemon" % DAEMON_CAP in daemon_log(d),
                    "the log names the daemon's bound")
            T.eq(c.ok("ping"), {}, "the daemon still answers")
            c.ok("closeSession", sessionId=sid)
            c.close()
        finally:
            tn.stop(d)


# --- the daemon --------------------------------------------------------

WORLD = []


class Hits(socketserver.StreamRequestHandler):
    """www.test:80: what came (nothing should)."""

    def handle(self):
        self.server.hits.append(self.rfile.readline())


def serve(handler, port=0):
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer((WWW, port), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, args=(0.05,),
                     daemon=True).start()
    return srv


def body(path, fx):
    # The allocator's quarantine would hold every relayed byte (ASan).
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                  ":quarantine_size_mb=4").lstrip(":")
    d = tn.start(path, ["--network-hosts", fx.hosts])
    if d is None:
        netns.skip("the daemon does not take --network-hosts")
    try:
        rules, why = tn.network_rules(d)
        if not rules:
            print("not run: every case: %s" % why)
            return
        www = serve(Hits, 80)
        www.hits = []
        WORLD.append(www)
        many_connections(d, fx)
        heads(d, fx)
        backpressure(d, fx)
        tool_end(d, fx)
        session_bound(d, fx)
        T.eq(d.leftovers(), [], "no tool process is left")
    finally:
        tn.stop(d)
    if rules:
        try:
            daemon_bound(path, fx)
        finally:
            www.shutdown()
            www.server_close()


def main():
    path = os.environ.get("STEXEC_DAEMON")
    if not path:
        print("STEXEC_DAEMON is not set: skipped")
        return netns.SKIP
    path = os.path.abspath(path)
    netns.enter([os.path.abspath(__file__)] + sys.argv[1:])
    fx = Fx()
    try:
        body(path, fx)
    except Exception:
        import traceback
        T.check(False, "raised:\n" + traceback.format_exc())
    finally:
        shutil.rmtree(fx.tmp, ignore_errors=True)
    print("%d passed, %d failed" % (T.passed, T.failed))
    if T.failed:
        return 1
    return 0 if T.passed else netns.SKIP


if __name__ == "__main__":
    sys.exit(main())
