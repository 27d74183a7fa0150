#!/usr/bin/env python3
"""Replay a recorded multi-turn agent transcript of bash calls through
stexecd, then type the same commands into one bash, and compare: the
built-in bash keeps its working directory from call to call, so every
result must be what that one shell gave.

  python3 examples/shell_replay.py [--socket PATH] [--dir DIR]
                                   TRANSCRIPT.json

TRANSCRIPT.json (examples/transcripts/, described in examples/README.md)
holds the assistant messages of a conversation: per turn, text and
tool_use blocks of the built-in bash. Each turn's blocks are handed to the
session as one turn (Turn.run); the session's directory is DIR (default: a
new temporary one), empty at the start.

The same commands then run, in order, in ONE bash (bash --norc --noprofile
reading a script from a pipe) started in DIR again emptied: each command's
stdout, stderr and status are captured and shaped as the daemon shapes a
result (stdout, then stderr, a newline between them when stdout does not
end with one, and on failure a line "Exit code N").

stdout: per call "same" or "DIFFERENT" with the command; for a difference,
both contents. Exit status 0 when every result is the same, 1 otherwise.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import stexec
except ImportError:       # not installed: the client in this tree
    sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
    import stexec


def tool_uses(transcript):
    """[[tool_use block]] per turn."""
    return [[b for b in turn["assistant"] if b.get("type") == "tool_use"]
            for turn in transcript["turns"]]


def through_daemon(socket_path, workdir, turns):
    """{tool_use id: (content, is_error)} from stexecd."""
    got = {}
    with stexec.Client(socket_path) as c:
        sid = c.create_session(cwd=workdir)
        try:
            for blocks in turns:
                for r in stexec.Turn(c, sid).run(blocks):
                    got[r["tool_use_id"]] = (r["content"], r["is_error"])
        finally:
            c.close_session(sid)
    return got


def result_content(out, err, status):
    """A result as stexecd words it (doc/design.md §4, S17)."""
    text = out
    if err:
        if text and not text.endswith("\n"):
            text += "\n"
        text += err
    if status != 0:
        if text and not text.endswith("\n"):
            text += "\n"
        text += "Exit code %d" % status
    return text


def through_one_shell(workdir, turns):
    """{tool_use id: (content, is_error)} from one bash, fed line by line:
    each command runs in that shell (eval), so its cd carries on; a marker
    line on stdout says it is done."""
    files = tempfile.mkdtemp(prefix="shell-replay-")
    sh = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=workdir,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env=dict(os.environ, PS1="", PS2=""))
    got = {}
    try:
        for blocks in turns:
            for b in blocks:
                base = os.path.join(files, b["id"])
                sh.stdin.write(("eval %s >%s.out 2>%s.err </dev/null; "
                                "echo $? >%s.rc; echo __done__\n" % (
                                    shlex.quote(b["input"]["command"]),
                                    shlex.quote(base), shlex.quote(base),
                                    shlex.quote(base))).encode())
                sh.stdin.flush()
                if sh.stdout.readline() != b"__done__\n":
                    raise RuntimeError("the reference shell stopped")
                parts = []
                for ext in ("out", "err", "rc"):
                    with open(base + "." + ext, encoding="utf-8",
                              errors="replace") as f:
                        parts.append(f.read())
                status = int(parts[2])
                got[b["id"]] = (result_content(parts[0], parts[1], status),
                                status != 0)
    finally:
        sh.stdin.close()
        sh.wait()
        shutil.rmtree(files, ignore_errors=True)
    return got


def empty(workdir):
    for name in os.listdir(workdir):
        path = os.path.join(workdir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("transcript")
    a = ap.parse_args()
    with open(a.transcript, encoding="utf-8") as f:
        turns = tool_uses(json.load(f))
    workdir = a.dir or tempfile.mkdtemp(prefix="shell-replay-dir-")
    workdir = os.path.realpath(workdir)
    try:
        empty(workdir)
        daemon = through_daemon(a.socket, workdir, turns)
        empty(workdir)
        shell = through_one_shell(workdir, turns)
    finally:
        if a.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    same = True
    for blocks in turns:
        for b in blocks:
            cmd = b["input"]["command"].splitlines()[0]
            if daemon.get(b["id"]) == shell[b["id"]]:
                print("same       %s" % cmd)
                continue
            same = False
            print("DIFFERENT  %s\n  stexecd:  %r\n  one bash: %r" % (
                cmd, daemon.get(b["id"]), shell[b["id"]]))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
