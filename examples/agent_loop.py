#!/usr/bin/env python3
"""An agent loop's tool step with asyncio: read a streamed Messages API
response (server-sent events), hand each tool_use block to stexecd the
moment its JSON is complete in the stream, and print the next request's
`user` message: every tool_result, in the order of the tool_use blocks.

  python3 examples/agent_loop.py [--socket PATH] [--cwd DIR] [--speed X]
                                 [--compare] STREAM.sse

STREAM.sse is a recorded response (examples/streams/, described in
examples/README.md) replayed with its recorded timing, so tools really run
while the rest of the message is still streaming. When an attempt breaks
off (an `error` event, or the end of the file before `message_stop`) the
turn is thrown away with `discard` and the retried response that follows
in the file is replayed into a new turn.

stdout: one line, the user message as JSON. stderr: a timeline, and with
--compare one `timing {...}` line: when the last result was ready, against
when it is ready if the same tools start only after message_stop.
"""

import argparse
import asyncio
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    from stexec import aio
except ImportError:       # not installed: the client in this tree
    sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
    from stexec import aio


# ------------------------------------------------------------ the stream

def read_sse(path):
    """The events of a recorded stream: [(t_ms, event, data)]. Server-sent
    events as the API sends them; a comment `: t=MS` gives the time at
    which the next event arrives, in ms after the request was sent."""
    events, t, name, data = [], 0, None, []
    with open(path, encoding="utf-8") as f:
        for line in f.read().splitlines() + [""]:
            if line == "":
                if data:
                    events.append((t, name or "message",
                                   json.loads("\n".join(data))))
                name, data = None, []
            elif line.startswith(":"):
                if line[1:].strip().startswith("t="):
                    t = int(line[1:].strip()[2:])
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
    return events


def attempts(events):
    """The stream cut into attempts: an `error` event ends one, and the
    retried response follows."""
    out = [[]]
    for ev in events:
        out[-1].append(ev)
        if ev[2].get("type") == "error":
            out.append([])
    return [a for a in out if a]


async def replay(events, speed, clock):
    """Yield (event, data) at the recorded times (`speed` 2: twice as fast,
    0: no waiting)."""
    for t, name, data in events:
        if speed > 0:
            await asyncio.sleep(max(0.0, t / speed / 1000 - clock()))
        yield name, data


class Log:
    """The timeline on stderr, in ms since the request was sent."""

    def __init__(self):
        self.t0 = time.monotonic()

    def now(self):
        return time.monotonic() - self.t0

    def ms(self):
        return round(self.now() * 1000)

    def __call__(self, what):
        print("[%6d ms] %s" % (self.ms(), what), file=sys.stderr, flush=True)


def show(log, note):
    if note.method == "tool_status":
        log("  %s %s" % (note.tool_use_id, note.params["status"]))
    elif note.method == "progress":
        log("  %s progress %s" % (note.tool_use_id,
                                  json.dumps(note.params["data"])[:60]))
    elif note.method == "tool_result":
        meta = note.params["meta"]
        log("  %s result: %s, ran %d ms" % (note.tool_use_id, meta["reason"],
                                            meta["durationMs"]))
    elif note.method == "permission_request":
        log("  %s asks permission" % note.tool_use_id)


# ------------------------------------------------------------ the turn

async def watch(turn, log, stream_over, last_result):
    """Show what the tools do while the stream goes on, then drain."""
    def see(note):
        show(log, note)
        if note.method == "tool_result":
            last_result[0] = log.ms()
    while not stream_over.is_set():
        async for note in turn.poll(timeout=0.05):
            see(note)
    async for note in turn.finish():
        see(note)


async def attempt(client, sid, stream, log):
    """Replay one attempt of the request into a new turn. Returns the
    turn, its tool_use blocks in stream order, and (message_stop ms, last
    result ms) when the message completed; None in their place when the
    stream broke off and the turn was discarded."""
    turn = aio.Turn(client, sid)
    blocks, tool_uses = {}, []
    stream_over = asyncio.Event()
    last_result = [None]
    watcher = None
    completed = False
    async for name, data in stream:
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
                # Complete: hand it over now; the daemon starts it as
                # early as safety allows.
                block = {"type": "tool_use", "id": b["id"], "name": b["name"],
                         "input": json.loads(b["json"] or "{}")}
                tool_uses.append(block)
                res = await turn.add_block(block)
                log("tool_use %s %s -> addTool: %s" % (
                    b["id"], b["name"], res["status"]))
                if watcher is None:
                    watcher = asyncio.ensure_future(
                        watch(turn, log, stream_over, last_result))
        elif kind == "message_delta":
            log("stop_reason %s" % data["delta"].get("stop_reason"))
        elif kind == "message_stop":
            log("message_stop")
            completed = True
            break
        elif kind == "error":
            log("stream error: %s" % data["error"].get("message"))
            break
    stop_ms = log.ms()
    if not completed:
        # Throw the turn away: nothing more of it is delivered, its tools
        # that can be killed are; the retry starts a clean turn.
        if watcher is not None:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass
        res = await client.discard(sid)
        log("discard: turn %d thrown away" % res["discardedTurn"])
        return turn, tool_uses, None
    stream_over.set()
    if watcher is not None:
        await watcher
    else:
        await turn.run([])     # no tool_use: drain the empty turn
    return turn, tool_uses, (stop_ms, last_result[0])


async def after_stop(client, sid, tool_uses, log):
    """The same tools added only once the message is complete, the way a
    frontend without streaming runs them: ms from adding to the last
    result."""
    turn = aio.Turn(client, sid)
    t0 = log.now()
    await turn.run(tool_uses)
    return round((log.now() - t0) * 1000)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stream", help="a recorded response, examples/streams/")
    ap.add_argument("--socket", help="stexecd's socket (default: "
                    "$STEXEC_SOCKET, $XDG_RUNTIME_DIR/stexec/stexecd.sock)")
    ap.add_argument("--cwd", default=os.path.dirname(HERE),
                    help="the session's directory (default: the top of "
                    "this tree, where the recorded tools look)")
    ap.add_argument("--speed", type=float, default=1.0,
                    help="replay speed: 1 recorded timing, 0 no waiting")
    ap.add_argument("--compare", action="store_true",
                    help="then run the same tools after message_stop and "
                    "print a timing line")
    args = ap.parse_args()
    events = read_sse(args.stream)

    async with aio.Client(args.socket) as client:
        sid = await client.create_session(cwd=os.path.abspath(args.cwd))
        log = Log()
        for n, events in enumerate(attempts(events)):
            if n:
                log("retrying: the response that follows in the stream")
            stream = replay(events, args.speed, log.now)
            turn, tool_uses, times = await attempt(client, sid, stream, log)
            if times is not None:
                break
        else:
            print("%s: the stream broke off and no retry follows"
                  % args.stream, file=sys.stderr)
            await client.close_session(sid)
            return 1
        message = {"role": "user", "content": turn.results}
        print(json.dumps(message, ensure_ascii=False), flush=True)

        stop_ms, last_ms = times
        if args.compare:
            took = await after_stop(client, sid, tool_uses, log)
            last = last_ms if last_ms is not None else stop_ms
            timing = {"messageStopMs": stop_ms,
                      "lastResultMs": last,
                      "afterStopLastResultMs": stop_ms + took,
                      "soonerMs": stop_ms + took - last}
            print("timing " + json.dumps(timing), file=sys.stderr)
        await client.close_session(sid)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:
        sys.exit(130)
