"""
What the MCP tests share beyond tests/peer.py: waiting for a server to be
ready.
"""
from peer import GUARD, Peer, add, result, session, text  # noqa: F401


def ready(c, server):
    return c.note("mcp_server", lambda p: p["name"] == server and
                  p["state"] == "ready" and p["tools"])
