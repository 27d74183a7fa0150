#!/usr/bin/env python3
"""A hostile MCP server on stdio for the tests of daemon/mcp/.

Its behaviour is chosen by its arguments (any number of them):
  hang-init     never answers initialize
  die-at-start  writes to stderr and exits 3 before reading anything
  old-version   answers initialize with revision 2024-11-05
  garbage       writes lines that are not JSON-RPC before each answer
  unknown-id    answers a request id nobody sent before each answer
  flood         sends 20000 notifications before each call's answer
  big-line      sends a 100 MB line before each call's answer
  ignore-cancel never stops a call on notifications/cancelled
  inline        answers echo at once, without a thread (the benchmark's)
  storm         writes 500 lines of garbage once initialized
Tools: echo (read-only), slow {ms, steps} (progress, stops on cancel),
crash (exits 3 mid-call after a word on stderr), image, roots (asks
roots/list), sample (asks sampling/createMessage), change (adds a tool and
sends tools/list_changed), calls (how many calls ran at once at most),
stamp (read-only) and write (not) {ms}: when they started and ended,
touch {path}: writes a file there (what its sandbox allows), fetch {url}:
an HTTP GET through whatever proxy its environment names, big {bytes}:
a text that long, HEAD...TAIL, gate {path} (read-only): a progress,
then its answer once that file exists (or a line "cancelled ID" on a
cancel).
With MCP_FAKE_LOG in its environment, it appends to that file a line per
event a test counts: "initialize PID", "call ID NAME", "cancelled ID".
"""
import json
import os
import sys
import threading
import time

modes = set(sys.argv[1:])
out_lock = threading.Lock()
pending = {}           # our requests to the client: id -> Event, answer
cancelled = set()
running = 0
most = 0
count_lock = threading.Lock()
extra_tools = []
next_id = [1000]

TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
            "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def log(line):
    path = os.environ.get("MCP_FAKE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def send(msg):
    data = json.dumps(msg, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def raw(data):
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def ask(method, params):
    with out_lock:
        rid = next_id[0]
        next_id[0] += 1
    ev = threading.Event()
    pending[rid] = [ev, None]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    ev.wait(20)
    return pending.pop(rid)[1]


def tools():
    t = [{"name": "echo", "description": "Echoes its text",
          "inputSchema": {"$schema": "http://json-schema.org/draft-07/"
                          "schema#", "type": "object",
                          "properties": {"text": {"type": "string",
                                                  "examples": ["hi"]}},
                          "propertyNames": {"maxLength": 16},
                          "required": ["text"]},
          "annotations": {"readOnlyHint": True}},
         {"name": "slow", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": True}},
         {"name": "crash", "inputSchema": {"type": "object"},
          "annotations": {"destructiveHint": True}},
         {"name": "image", "inputSchema": {"type": "object"}},
         {"name": "roots", "inputSchema": {"type": "object"}},
         {"name": "sample", "inputSchema": {"type": "object"}},
         {"name": "change", "inputSchema": {"type": "object"}},
         {"name": "calls", "inputSchema": {"type": "object"}},
         {"name": "weird.name/x", "inputSchema": {"type": "object"}},
         {"name": "stamp", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": True}},
         {"name": "write", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": False}},
         {"name": "touch", "inputSchema": {"type": "object"}},
         {"name": "fetch", "inputSchema": {"type": "object"}},
         {"name": "big", "inputSchema": {"type": "object"}},
         {"name": "gate", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": True}}]
    return t + extra_tools


def before_answer():
    if "garbage" in modes:
        raw("this is not json\n{\"truncated\": \n[1,2,\n\"x\"\n{}\n")
    if "unknown-id" in modes:
        send({"jsonrpc": "2.0", "id": 987654, "result": {}})
    if "flood" in modes:
        note = json.dumps({"jsonrpc": "2.0",
                           "method": "notifications/message",
                           "params": {"level": "info", "data": "flood"}})
        raw((note + "\n") * 20000)
    if "big-line" in modes:
        chunk = "x" * (1 << 20)
        with out_lock:
            for _ in range(100):
                sys.stdout.write(chunk)
            sys.stdout.write("\n")
            sys.stdout.flush()


def text(rid, s, is_error=False):
    before_answer()
    send({"jsonrpc": "2.0", "id": rid,
          "result": {"content": [{"type": "text", "text": s}],
                     "isError": is_error}})


def call(rid, params):
    global running, most
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    with count_lock:
        running += 1
        most = max(most, running)
    try:
        if name == "echo":
            text(rid, "echo: " + str(args.get("text")))
        elif name == "slow":
            steps = int(args.get("steps", 5))
            for i in range(steps):
                if rid in cancelled and "ignore-cancel" not in modes:
                    sys.stderr.write("cancelled %s\n" % rid)
                    sys.stderr.flush()
                    return
                if token is not None:
                    send({"jsonrpc": "2.0",
                          "method": "notifications/progress",
                          "params": {"progressToken": token,
                                     "progress": i + 1, "total": steps,
                                     "message": "step %d" % (i + 1)}})
                time.sleep(int(args.get("ms", 100)) / 1000.0)
            text(rid, "slow done")
        elif name == "crash":
            sys.stderr.write("fake server: crashing on purpose\n")
            sys.stderr.flush()
            time.sleep(0.05)
            os._exit(3)
        elif name == "image":
            before_answer()
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [
                {"type": "image", "data": TINY_PNG,
                 "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///x/y.txt",
                 "name": "y.txt", "mimeType": "text/plain"}],
                "structuredContent": {"answer": 42}}})
        elif name == "roots":
            r = ask("roots/list", {})
            text(rid, json.dumps(r))
        elif name == "sample":
            r = ask("sampling/createMessage",
                    {"messages": [{"role": "user", "content": {
                        "type": "text", "text": "hi"}}],
                     "maxTokens": 10})
            text(rid, json.dumps(r))
        elif name == "change":
            extra_tools.append({"name": "added",
                                "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0",
                  "method": "notifications/tools/list_changed"})
            text(rid, "changed")
        elif name in ("stamp", "write"):
            start = time.monotonic()
            time.sleep(int(args.get("ms", 100)) / 1000.0)
            text(rid, "%s %.6f %.6f" % (name, start, time.monotonic()))
        elif name == "touch":
            try:
                with open(args["path"], "w") as f:
                    f.write("touched\n")
                text(rid, "wrote " + args["path"])
            except OSError as e:
                text(rid, "cannot write: " + str(e), True)
        elif name == "fetch":
            import urllib.request
            try:
                with urllib.request.urlopen(args["url"], timeout=20) as r:
                    text(rid, "status %d" % r.status)
            except Exception as e:
                body = ""
                if hasattr(e, "read"):
                    body = e.read().decode("utf-8", "replace")[:300]
                text(rid, "cannot fetch: %s %s" % (e, body), True)
        elif name == "gate":
            if token is not None:
                send({"jsonrpc": "2.0",
                      "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": 1}})
            while not os.path.exists(args["path"]):
                if rid in cancelled:
                    log("cancelled %s" % rid)
                    return
                time.sleep(0.02)
            text(rid, "gate opened")
        elif name == "big":
            n = int(args.get("bytes", 300000))
            text(rid, "HEAD" + "x" * (n - 8) + "TAIL")
        elif name == "calls":
            text(rid, str(most))
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32602, "message": "no tool " +
                            str(name)}})
    finally:
        with count_lock:
            running -= 1


def main():
    if "die-at-start" in modes:
        sys.stderr.write("fake server: cannot start, on purpose\n")
        sys.exit(3)
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        rid = msg.get("id")
        if method is None:
            if rid in pending:
                pending[rid][1] = msg
                pending[rid][0].set()
            continue
        if method == "initialize":
            log("initialize %d" % os.getpid())
            if "hang-init" in modes:
                continue
            version = ("2024-11-05" if "old-version" in modes
                       else msg["params"]["protocolVersion"])
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1"},
                "instructions": json.dumps(msg["params"]["capabilities"])}})
        elif method == "notifications/initialized":
            sys.stderr.write("initialized\n")
            sys.stderr.flush()
            if "storm" in modes:
                raw("garbage\n" * 500)
        elif method == "tools/list":
            all_tools = tools()
            cursor = (msg.get("params") or {}).get("cursor")
            if cursor is None:
                send({"jsonrpc": "2.0", "id": rid, "result": {
                    "tools": all_tools[:3], "nextCursor": "page2"}})
            else:
                send({"jsonrpc": "2.0", "id": rid, "result": {
                    "tools": all_tools[3:]}})
        elif method == "tools/call" and "inline" in modes and \
                msg["params"].get("name") == "echo":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [
                {"type": "text", "text": "echo: " +
                 str(msg["params"]["arguments"].get("text"))}]}})
        elif method == "tools/call":
            log("call %s %s" % (rid, msg["params"].get("name")))
            threading.Thread(target=call, args=(rid, msg["params"]),
                             daemon=True).start()
        elif method == "notifications/cancelled":
            cancelled.add(msg["params"]["requestId"])
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": "unknown"}})


if __name__ == "__main__":
    main()
