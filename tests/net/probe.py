"""
Socket probes run inside a tool: each prints "OK ..." when it got through,
or "ERRNO NAME ..." for the error that stopped it.

  probe.py udp HOST PORT TOKEN    one datagram
  probe.py tcp HOST PORT|proxy    a direct connect (proxy: $HTTP_PROXY's port)
  probe.py icmp HOST              an echo by raw socket, else a ping socket
  probe.py raw REQUEST            REQUEST (\\r\\n escaped) to $HTTP_PROXY as is
"""
import errno
import os
import socket
import struct
import sys


def proxy_addr():
    url = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy") or ""
    hostport = url.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    return host, int(port) if port.isdigit() else 3128


def fail(what, e):
    print("ERRNO %s %s: %s" % (errno.errorcode.get(e.errno, e.errno),
                               what, e), flush=True)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def echo(kind, host):
    s = socket.socket(socket.AF_INET, kind, socket.IPPROTO_ICMP)
    s.settimeout(5)
    body = struct.pack("!HH", 0x5354, 1) + b"stexec-probe"
    pkt = struct.pack("!BBH", 8, 0, 0) + body
    pkt = struct.pack("!BBH", 8, 0, checksum(pkt)) + body
    s.sendto(pkt, (host, 0))
    s.recvfrom(1024)
    return "OK echo reply by %s socket" % (
        "raw" if kind == socket.SOCK_RAW else "ping")


def complete(out):
    """A whole response: its head and Content-Length bytes of body (a
    proxy may keep the connection open after a refusal)."""
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v)
    return False


def main(mode, *args):
    if mode == "udp":
        host, port, token = args
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(token.encode(), (host, int(port)))
            print("OK sent")
        except OSError as e:
            fail("sendto", e)
    elif mode == "tcp":
        host, port = args
        port = proxy_addr()[1] if port == "proxy" else int(port)
        try:
            socket.create_connection((host, port), timeout=10).close()
            print("OK connected to %s:%d" % (host, port))
        except OSError as e:
            fail("connect %s:%d" % (host, port), e)
    elif mode == "icmp":
        host, = args
        for kind in (socket.SOCK_RAW, socket.SOCK_DGRAM):
            try:
                print(echo(kind, host))
                return
            except OSError as e:
                fail("raw" if kind == socket.SOCK_RAW else "ping", e)
    elif mode == "raw":
        req = args[0].replace("\\r\\n", "\r\n").encode()
        try:
            s = socket.create_connection(proxy_addr(), timeout=10)
            s.sendall(req)
            out = b""
            while not complete(out):
                try:
                    b = s.recv(65536)
                except TimeoutError:
                    break
                if not b:
                    break
                out += b
            print(out.decode("utf-8", "replace"))
        except OSError as e:
            fail("proxy", e)


if __name__ == "__main__":
    main(*sys.argv[1:])
