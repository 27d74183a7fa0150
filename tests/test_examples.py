#!/usr/bin/env python3
"""
An agent-loop example (examples/agent_loop.py, or its twin given as
COMMAND) over every recorded stream in examples/streams/,
against a real stexecd on a private socket: the printed user message pairs
every tool_use id of the (last, completed) response exactly once, in
stream order, with what NAME.expect.json says; tools were handed over
before message_stop; an interrupted attempt was discarded; the streaming
run's last result came sooner than when the same tools start after
message_stop; no tool process is left. Without COMMAND, also
examples/shell_replay.py over every transcript in examples/transcripts/:
each bash result through the daemon is what one bash gave.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_examples.py [COMMAND...]

COMMAND runs the example (default: this python3 on examples/agent_loop.py;
e.g. node examples/dist/agent_loop.js); the options and the stream follow.

Exit 0 when every check passed, 1 otherwise, 77 (skipped) when
STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import glob
import json
import os
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
EXAMPLE = os.path.join(TOP, "examples", "agent_loop.py")
REPLAY = os.path.join(TOP, "examples", "shell_replay.py")

import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

T = Checks()
# Streams whose slow bash overlaps the rest of the message by far more
# than any scheduling noise: streaming must win there.
OVERLAPPED = {"interleaved", "bash_cascade"}


def stream_facts(path):
    """From the raw file, independently of the example: the tool_use ids of
    the last response, and whether an earlier attempt broke off."""
    ids, broke = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("data:"):
                continue
            data = json.loads(line[5:])
            if data["type"] == "message_start":
                ids = []
            elif data["type"] == "error":
                broke = True
            elif (data["type"] == "content_block_start" and
                  data["content_block"]["type"] == "tool_use"):
                ids.append(data["content_block"]["id"])
    return ids, broke


def check_stream(d, command, path):
    name = os.path.basename(path)[:-4]
    p = subprocess.run(command + ["--socket", d.sock, "--compare", path],
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=pydaemon.scaled(120))
    out = p.stdout.decode("utf-8")
    err = p.stderr.decode("utf-8", "replace")
    if not T.eq(p.returncode, 0, "%s: exit status" % name):
        print(err, file=sys.stderr)
        return
    lines = out.splitlines()
    T.eq(len(lines), 1, "%s: one line on stdout" % name)
    msg = json.loads(lines[0])
    T.eq(msg.get("role"), "user", "%s: a user message" % name)
    content = msg.get("content", [])
    ids, broke = stream_facts(path)
    T.check(len(ids) > 0, "%s: the stream has tool_use blocks" % name)
    got = [b.get("tool_use_id") for b in content]
    T.eq(got, ids, "%s: every tool_use id once, in stream order" % name)
    T.check(all(b.get("type") == "tool_result" and
                isinstance(b.get("content"), str) for b in content),
            "%s: tool_result blocks" % name)
    with open(path[:-4] + ".expect.json", encoding="utf-8") as f:
        want = json.load(f)["toolResults"]
    T.eq([{k: b.get(k) for k in w} for w, b in zip(want, content)], want,
         "%s: results as %s.expect.json says" % (name, name))

    # The timeline: [   123 ms] ...; each tool handed over before the end.
    at = {}
    for line in err.splitlines():
        m = re.match(r"\[\s*(\d+) ms\] (.*)", line)
        if m:
            at.setdefault(m.group(2).split(" -> ")[0], int(m.group(1)))
    stop = at.get("message_stop")
    adds = [t for what, t in at.items() if what.startswith("tool_use ")]
    T.check(stop is not None and len(adds) >= len(ids) and
            all(t <= stop for t in adds),
            "%s: every tool_use handed over before message_stop" % name)
    T.eq(any(w.startswith("discard: ") for w in at), broke,
         "%s: a broken-off attempt is discarded" % name)
    timing = [json.loads(line[7:]) for line in err.splitlines()
              if line.startswith("timing ")]
    if T.eq(len(timing), 1, "%s: one timing line" % name):
        t = timing[0]
        T.check(t["lastResultMs"] > 0 and
                t["afterStopLastResultMs"] > t["messageStopMs"],
                "%s: timing figures %r" % (name, t))
        if name in OVERLAPPED:
            T.check(t["soonerMs"] > 0, "%s: streaming is sooner: %r"
                    % (name, t))
        print("%s: %s" % (name, json.dumps(t)))


def check_transcript(d, path):
    """examples/shell_replay.py: each bash result of the transcript, run
    through the daemon, is what one bash typed the same commands gave."""
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        calls = sum(1 for turn in json.load(f)["turns"]
                    for b in turn["assistant"] if b["type"] == "tool_use")
    p = subprocess.run([sys.executable, REPLAY, "--socket", d.sock, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=pydaemon.scaled(120))
    out = p.stdout.decode("utf-8", "replace")
    T.eq(p.returncode, 0, "%s: the replay matches one bash:\n%s%s" % (
        name, out, p.stderr.decode("utf-8", "replace")))
    T.eq(sum(1 for line in out.splitlines() if line.startswith("same ")),
         calls, "%s: every call compared" % name)


def main():
    command = sys.argv[1:] or [sys.executable, EXAMPLE]
    transcripts = [] if sys.argv[1:] else sorted(glob.glob(os.path.join(
        TOP, "examples", "transcripts", "*.json")))
    streams = sorted(glob.glob(os.path.join(TOP, "examples", "streams",
                                            "*.sse")))

    def every_stream(d):
        T.check(len(streams) >= 4, "four recorded streams: %r" % streams)
        for _ in range(int(pydaemon.scaled(100))):
            if os.path.exists(d.sock):
                break
            time.sleep(0.1)
        for path in streams:
            try:
                check_stream(d, command, path)
            except Exception:
                T.check(False, "%s raised:\n%s"
                        % (path, traceback.format_exc()))
        # The shell replay is Python only: not again for a twin.
        T.check(sys.argv[1:] or transcripts, "a recorded transcript")
        for path in transcripts:
            try:
                check_transcript(d, path)
            except Exception:
                T.check(False, "%s raised:\n%s"
                        % (path, traceback.format_exc()))
    return pydaemon.run(T, every_stream)


if __name__ == "__main__":
    sys.exit(main())
