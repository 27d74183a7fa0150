"""
The test's servers, in threads of the test process: every site serves the
same pages (so a leak to evil.test would be seen succeeding), each naming
itself: /hello, a PEP 503 index and its wheel, an npm packument and its
tarball, git smart HTTP through `git http-backend` (CGI, run per request),
the cloud metadata path; plain HTTP on 80 and HTTPS on 443 of each address;
evil.test also on common proxy ports and a UDP sink on 53.
"""
import json
import os
import socket
import socketserver
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import packages
from netns import METADATA, SITES

# The extra ports evil.test listens on: where a tool's proxy might be.
EVIL_PORTS = (53, 1080, 3128, 8080, 8888)


class Content:
    """What every site serves, built once."""

    def __init__(self, wheel, tgz, git_root, home):
        self.wheel = wheel
        self.tgz = tgz
        self.git_root = git_root
        self.home = home
        self.index = packages.simple_index(wheel)


class Handler(BaseHTTPRequestHandler):
    timeout = 30
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()

    def reply(self, code, body, ctype="text/plain"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def target(self):
        """The path, also of an absolute-form request."""
        p = self.path
        for scheme in ("http://", "https://"):
            if p.startswith(scheme):
                rest = p[len(scheme):]
                p = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return p

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        srv = self.server
        c = srv.content
        path = self.target()
        srv.hits.append((self.command, path, self.headers.get("Host")))
        if path.startswith("/repo.git/"):
            return self.git(path)
        if path == "/hello":
            return self.reply(200, "hello from %s\n" % srv.site)
        if path == "/":
            return self.reply(200, "%s server\n" % srv.site)
        if path == "/latest/meta-data/":
            return self.reply(200, "ami-id\ninstance-id\n")
        if path in c.index:
            return self.reply(200, c.index[path], "text/html")
        if path == "/files/" + packages.WHEEL:
            return self.reply(200, c.wheel, "application/octet-stream")
        if c.tgz is not None and path == "/" + packages.NAME:
            host = self.headers.get("Host") or srv.site
            base = "%s://%s" % ("https" if srv.tls else "http", host)
            doc = json.dumps(packages.packument(c.tgz, base))
            return self.reply(200, doc, "application/json")
        if c.tgz is not None and path == "/%s/-/%s" % (packages.NAME,
                                                       packages.TGZ):
            return self.reply(200, c.tgz, "application/octet-stream")
        if path.startswith("/bytes/"):
            return self.bytes(int(path[len("/bytes/"):]))
        self.reply(404, "not found on %s\n" % srv.site)

    def do_POST(self):
        path = self.target()
        self.server.hits.append(("POST", path, self.headers.get("Host")))
        if path.startswith("/repo.git/"):
            return self.git(path)
        self.reply(404, "not found\n")

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def git(self, path):
        """git http-backend as CGI: its headers become ours."""
        data = self.body() if self.command == "POST" else b""
        query = self.path.partition("?")[2]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.server.content.home,
            "GIT_PROJECT_ROOT": self.server.content.git_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path.partition("?")[0],
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(data)),
            "REMOTE_ADDR": self.client_address[0],
        }
        for h, v in (("Git-Protocol", "GIT_PROTOCOL"),
                     ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
            if self.headers.get(h):
                env[v] = self.headers[h]
        p = subprocess.run(["git", "http-backend"], input=data, env=env,
                           capture_output=True)
        out = p.stdout
        sep = out.find(b"\r\n\r\n")
        head, body = ((out[:sep], out[sep + 4:]) if sep >= 0
                      else out.partition(b"\n\n")[::2])
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def bytes(self, n):
        """n bytes of zeros, written in large blocks (the benchmark)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        block = bytes(1 << 20)
        while n > 0:
            k = min(n, len(block))
            self.wfile.write(memoryview(block)[:k])
            n -= k


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, port, site, content, tls=None):
        self.address_family = (socket.AF_INET6 if ":" in addr
                               else socket.AF_INET)
        self.site = site
        self.content = content
        self.tls = tls is not None
        self.hits = []
        super().__init__((addr, port), Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    def server_bind(self):
        # HTTPServer's own would look its name up (no DNS here).
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.site, self.server_address[1]

    def handle_error(self, request, client_address):
        # A probe that connects and leaves, or fails TLS, is expected.
        pass


class UdpSink(socketserver.UDPServer):
    allow_reuse_address = True

    def __init__(self, addr, port):
        self.datagrams = []
        super().__init__((addr, port), UdpSink.H)

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            self.server.datagrams.append(self.request[0])


class World:
    """Every server of the test, started and stopped together."""

    def __init__(self, content, cert, key, loopback_port=80):
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(cert, key)
        self.servers = {}
        for name, addr in SITES.items():
            self.add(name, addr, 80, content)
            self.add(name, addr, 443, content, self.tls)
        self.add("www.test", SITES["www.test"], 8443, content, self.tls)
        for port in EVIL_PORTS:
            self.add("evil.test", SITES["evil.test"], port, content)
        self.add("metadata", METADATA, 80, content)
        self.add("loopback", "127.0.0.1", loopback_port, content)
        self.udp = UdpSink(SITES["evil.test"], 53)
        self.threads = []
        for s in list(self.servers.values()) + [self.udp]:
            t = threading.Thread(target=s.serve_forever, args=(0.05,),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def add(self, site, addr, port, content, tls=None):
        self.servers[(site, port)] = Server(addr, port, site, content, tls)

    def hits(self, site):
        return [h for (s, _), srv in self.servers.items() if s == site
                for h in srv.hits]

    def stop(self):
        for s in list(self.servers.values()) + [self.udp]:
            s.shutdown()
            s.server_close()
        for t in self.threads:
            t.join()
