"""
What the MCP tests share beyond tests/peer.py: a session that sees its
servers' first notes, and waiting for a server to be ready.
"""
from peer import GUARD, Peer, add, result, text  # noqa: F401


def session(d, cwd, **extra):
    """A session subscribed from its first note: a server ready before
    the subscribe (a shared one, or a quick one on a slow host) is still
    seen."""
    c = Peer(d.sock)
    sid = c.ok("createSession", cwd=cwd, **extra)["sessionId"]
    c.ok("subscribe", sessionId=sid, since=0)
    return c, sid


def ready(c, server):
    return c.note("mcp_server", lambda p: p["name"] == server and
                  p["state"] == "ready" and p["tools"])
