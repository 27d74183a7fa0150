#!/usr/bin/env python3
"""A full agent loop's tool step where some tools live in the frontend:
`Task` (a subagent) and `TodoWrite` are run by this client (ToolDefs with
"runner": "client", served with `session.serve`), `bash` and `read_file`
(one of them on a PNG image) by stexecd, all of them in the daemon's one
executor: each tool starts the moment its tool_use block is complete in
the streamed message, safe ones side by side, unsafe ones alone, and the
results come back in the order of the blocks.

  python3 examples/client_tools.py [--socket PATH] [--cwd DIR] [--speed X]
                                   [--interrupt] [STREAM.sse]

STREAM.sse (default examples/client_tools/message.sse) is the model's
message, a recorded Messages API stream replayed with its timing. The
session's directory (--cwd, default a new temporary one) gets notes.txt and
plot.png, a small PNG made here, which the message's tools read.
--interrupt: the user presses Esc once the subagent has started: its
handler is cancelled (tool_cancel, reason "interrupt"), and so is every
tool not yet started.

stdout: one line, the next request's user message (tool_result blocks, the
image one with an image block). stderr: a timeline, each result as it
comes.
"""

import argparse
import asyncio
import json
import os
import shutil
import struct
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agent_loop import Log, read_sse, replay  # noqa: E402  (and stexec)
from stexec import aio, content_images, text_block  # noqa: E402

# The frontend's tools, defined in the session like any tool: the executor
# schedules them; this client runs them.
TODO_WRITE = {
    "name": "TodoWrite",
    "description": "Create and update the session's todo list.",
    "runner": "client",
    "inputSchema": {
        "type": "object",
        "properties": {"todos": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "minLength": 1},
                "status": {"enum": ["pending", "in_progress",
                                    "completed"]},
                "activeForm": {"type": "string", "minLength": 1}},
            "required": ["content", "status", "activeForm"]}}},
        "required": ["todos"]},
    # Unsafe (the default): it runs alone, after what came before it.
}
TASK = {
    "name": "Task",
    "description": "Launch a subagent for a task of several steps.",
    "runner": "client",
    "inputSchema": {
        "type": "object",
        "properties": {"description": {"type": "string"},
                       "prompt": {"type": "string"},
                       "subagent_type": {"type": "string"}},
        "required": ["description", "prompt"]},
    # Subagents run beside reads, and Esc stops them.
    "concurrencySafe": True,
    "interruptBehavior": "cancel",
}

NOTES = ("stexec runs every tool of a model's message in one executor.\n"
         "Tools the frontend keeps, like subagents and the todo list,\n"
         "are scheduled with the daemon's own.\n")


def plot_png(width=48, height=32):
    """A small valid PNG: an RGB gradient, zlib-compressed."""
    def chunk(kind, data):
        body = kind + data
        return (struct.pack(">I", len(data)) + body +
                struct.pack(">I", zlib.crc32(body) & 0xffffffff))
    rows = b"".join(
        b"\0" + b"".join(bytes((x * 255 // (width - 1),
                                y * 255 // (height - 1), 160))
                         for x in range(width))
        for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0,
                                       0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def describe(content):
    """A result's content in one line: text cut short, images by size."""
    if isinstance(content, str):
        return json.dumps(content[:60] + ("…" if len(content) > 60 else ""),
                          ensure_ascii=False)
    parts = []
    for b in content:
        if b.get("type") == "text":
            parts.append("text %s" % describe(b["text"]))
    parts += ["image %s, %d bytes" % (kind, len(data))
              for kind, data in content_images(content)]
    return "[" + "; ".join(parts) + "]"


class Frontend:
    """The tools this client runs, and what they did."""

    def __init__(self, log, cwd):
        self.log = log
        self.cwd = cwd
        self.todos = []
        self.subagent_started = asyncio.Event()

    async def todo_write(self, input, call):
        self.todos = input["todos"]
        self.log("  %s TodoWrite: %s" % (call.tool_use_id, ", ".join(
            "%s (%s)" % (t["content"], t["status"]) for t in self.todos)))
        return ("Todos have been modified successfully. Ensure that you "
                "continue to use the todo list to track your progress.")

    async def task(self, input, call):
        """A subagent, played here: it works a while, reporting progress;
        Esc (tool_cancel) stops it."""
        self.log("  %s Task started here: %s" % (call.tool_use_id,
                                                 input["description"]))
        self.subagent_started.set()
        try:
            await call.progress({"subagent": "reading notes.txt"})
            with open(os.path.join(self.cwd, "notes.txt"),
                      encoding="utf-8") as f:
                lines = f.read().splitlines()
            await asyncio.sleep(0.4)
            await call.progress({"subagent": "summarizing"})
            await asyncio.sleep(0.4)
        except asyncio.CancelledError:
            self.log("  %s Task cancelled here: %s" % (call.tool_use_id,
                                                       call.cancel_reason))
            raise
        return [text_block("Summary of notes.txt (%d lines): %s"
                           % (len(lines), lines[0]))]


async def run(client, sid, events, speed, interrupt, log, frontend):
    """Replay the message into one turn; returns the turn once drained."""
    turn = aio.Turn(client, sid)
    names, blocks = {}, {}
    over = asyncio.Event()

    def show(note):
        if note.method == "tool_result":
            p = note.params
            log("  %s result (%s): %s, %s" % (
                note.tool_use_id, names.get(note.tool_use_id, "?"),
                p["meta"]["reason"], describe(p["result"]["content"])))
        elif note.method == "progress":
            log("  %s progress %s" % (note.tool_use_id,
                                      json.dumps(note.params["data"])))

    async def watch():
        while not over.is_set():
            async for note in turn.poll(timeout=0.05):
                show(note)

    async def esc():
        await frontend.subagent_started.wait()
        await asyncio.sleep(0.1)
        log("Esc: the user interrupts")
        await turn.interrupt()

    watcher = asyncio.ensure_future(watch())
    presser = asyncio.ensure_future(esc()) if interrupt else None
    async for _, data in replay(events, speed, log.now):
        kind = data.get("type")
        if kind == "message_start":
            log("message_start %s" % data["message"]["id"])
        elif kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], json="")
        elif kind == "content_block_delta":
            b, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                b["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                b["json"] += delta["partial_json"]
        elif kind == "content_block_stop":
            b = blocks.pop(data["index"])
            if b["type"] == "text":
                log("text: %s" % b["text"][:70])
            elif b["type"] == "tool_use":
                # Complete: hand it over now, whoever runs it.
                block = {"type": "tool_use", "id": b["id"],
                         "name": b["name"],
                         "input": json.loads(b["json"] or "{}")}
                names[b["id"]] = b["name"]
                res = await turn.add_block(block)
                log("tool_use %s %s -> addTool: %s" % (b["id"], b["name"],
                                                       res["status"]))
        elif kind == "message_stop":
            log("message_stop")
            break
        elif kind == "error":
            raise RuntimeError("the stream broke off: %s" % data)
    over.set()
    await watcher
    async for note in turn.finish():
        show(note)
    if presser is not None and not presser.done():
        presser.cancel()
    return turn


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stream", nargs="?",
                    default=os.path.join(HERE, "client_tools",
                                         "message.sse"))
    ap.add_argument("--socket", help="stexecd's socket (default: "
                    "$STEXEC_SOCKET, $XDG_RUNTIME_DIR/stexec/stexecd.sock)")
    ap.add_argument("--cwd", help="the session's directory (default: a "
                    "new temporary one)")
    ap.add_argument("--speed", type=float, default=1.0,
                    help="replay speed: 1 recorded timing, 0 no waiting")
    ap.add_argument("--interrupt", action="store_true",
                    help="press Esc once the subagent has started")
    args = ap.parse_args()
    events = read_sse(args.stream)
    cwd = os.path.abspath(args.cwd) if args.cwd else tempfile.mkdtemp(
        prefix="stexec-client-tools-")
    with open(os.path.join(cwd, "notes.txt"), "w", encoding="utf-8") as f:
        f.write(NOTES)
    with open(os.path.join(cwd, "plot.png"), "wb") as f:
        f.write(plot_png())
    try:
        async with aio.Client(args.socket) as client:
            sid = await client.create_session(tools=[TODO_WRITE, TASK],
                                              cwd=cwd)
            log = Log()
            frontend = Frontend(log, cwd)
            # Claim the frontend's tools: their tool_starts come here.
            await client.session(sid).serve({"TodoWrite": frontend.todo_write,
                                             "Task": frontend.task})
            turn = await run(client, sid, events, args.speed,
                             args.interrupt, log, frontend)
            print(json.dumps({"role": "user", "content": turn.results},
                             ensure_ascii=False), flush=True)
            await client.close_session(sid)
    finally:
        if not args.cwd:
            shutil.rmtree(cwd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:
        sys.exit(130)
