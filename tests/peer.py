"""
What the Python suites of the wire share: a JSON-RPC connection that keeps
every message it reads (responses by id, notifications in order, so that
waiting for one never loses another; tests/README.md, Time), checked
against protocol/schemas/, and the first steps of a session.
"""
import json
import select
import socket
import time

from pydaemon import scaled

GUARD = scaled(60)

try:
    from test_wire_schemas import Schemas
    SCHEMAS = Schemas()
except ImportError:
    # Without python3-jsonschema the wire is not checked here.
    SCHEMAS = None


def checked(key, value):
    """value against protocol/schemas/ (key: a schema, or result:METHOD)."""
    if SCHEMAS is None:
        return
    errors = SCHEMAS.errors(key, value)
    if errors:
        raise AssertionError("%s does not match its schema: %s\n%s" % (
            key, "; ".join(errors[:3]), json.dumps(value)[:500]))


class Peer:
    """A JSON-RPC connection that keeps every message it reads."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = b""
        self.rid = 0
        self.responses = {}
        self.notes = []

    def send(self, method, **params):
        self.rid += 1
        self.s.sendall((json.dumps({"jsonrpc": "2.0", "id": self.rid,
                                    "method": method, "params": params})
                        + "\n").encode())
        return self.rid

    def pump(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([self.s], [], [], left)
        if not r:
            return False
        data = self.s.recv(1 << 20)
        if not data:
            raise EOFError("the daemon closed the connection")
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            msg = json.loads(line)
            if "id" in msg and "method" not in msg:
                self.responses[msg["id"]] = msg
            else:
                checked("notification", msg)
                self.notes.append(msg)
        return True

    def call(self, method, _check=True, **params):
        """The response; the request is checked against its schema unless
        it is meant to be wrong (_check False)."""
        if _check:
            checked("request", {"jsonrpc": "2.0", "id": self.rid + 1,
                                "method": method, "params": params})
        rid = self.send(method, **params)
        deadline = time.monotonic() + GUARD
        while rid not in self.responses:
            if not self.pump(deadline):
                raise AssertionError("no response to %s" % method)
        return self.responses.pop(rid)

    def ok(self, method, **params):
        msg = self.call(method, **params)
        if "error" in msg:
            raise AssertionError("%s: %s" % (method, msg["error"]))
        checked("result:" + method, msg["result"])
        return msg["result"]

    def note(self, method, pred=lambda p: True):
        deadline = time.monotonic() + GUARD
        while True:
            for i, n in enumerate(self.notes):
                if n.get("method") == method and pred(n["params"]):
                    return self.notes.pop(i)["params"]
            if not self.pump(deadline):
                raise AssertionError("no %s notification came" % method)

    def close(self):
        self.s.close()


def session(d, cwd, **extra):
    c = Peer(d.sock)
    sid = c.ok("createSession", cwd=cwd, **extra)["sessionId"]
    c.ok("subscribe", sessionId=sid)
    return c, sid


def add(c, sid, tid, name, inp):
    return c.ok("addTool", sessionId=sid,
                toolUse={"id": tid, "name": name, "input": inp})


def result(c, tid):
    """The tool_result of tid (waits for it)."""
    return c.note("tool_result", lambda p: p["toolUseId"] == tid)


def text(r):
    content = r["result"]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content)


def new_image(d, before):
    """Wait for the image after before (the event a reload gives)."""
    guard = time.monotonic() + GUARD
    while True:
        try:
            probe = Peer(d.sock)
            now = probe.ok("initialize")["server"].get("instance")
            probe.close()
            if now != before:
                return
        except (OSError, EOFError):
            pass
        if time.monotonic() > guard:
            raise AssertionError("no new image came")
        time.sleep(0.05)
