#!/usr/bin/env python3
"""One turn the way an agent frontend runs it: two read_file calls and a
bash call, handed to stexecd as if they streamed in from the model; progress
is printed as it arrives and the tool_results in the order of the calls.

  python3 example.py [SOCKET]        (default: $STEXEC_SOCKET, ...)
"""
import json
import os
import sys

from stexec import Client, StexecConnectionError, StexecError, Turn

HERE = os.path.dirname(os.path.abspath(__file__))

# What the model asked for, in the order it asked.
TOOL_USES = [
    {"type": "tool_use", "id": "toolu_01", "name": "read_file",
     "input": {"file_path": os.path.join(HERE, "README.md"), "limit": 3}},
    {"type": "tool_use", "id": "toolu_02", "name": "read_file",
     "input": {"file_path": os.path.abspath(__file__), "limit": 3}},
    {"type": "tool_use", "id": "toolu_03", "name": "bash",
     "input": {"command": "for i in 1 2 3; do "
                          "printf '{\"progress\":{\"step\":%d,\"of\":3}}\\n' "
                          "$i >&3; sleep 0.2; done; echo bash done"}},
]


def main() -> int:
    try:
        client = Client(sys.argv[1] if len(sys.argv) > 1 else None)
    except StexecConnectionError as e:
        print(e, file=sys.stderr)
        return 1
    with client:
        sid = client.create_session(cwd=HERE)
        turn = Turn(client, sid)
        # The blocks stream in: add each at once; tools start as soon as
        # safety allows (the two reads run in parallel, bash after them).
        for block in TOOL_USES:
            res = turn.add_block(block)
            print("added %s (%s): %s" % (block["id"], block["name"],
                                          res["status"]))
            for note in turn.poll():          # show what arrived meanwhile
                show(note)
        # The message is complete: drain, showing progress as it comes.
        for note in turn.finish():
            show(note)
        print("\nturn %d: %d results, in order:" % (turn.drained["turn"],
                                                    turn.drained["results"]))
        for block in turn.results:            # paste-ready for the model
            print(json.dumps(block, ensure_ascii=False))
        client.close_session(sid)
    return 0


def show(note) -> None:
    if note.method == "progress":
        print("  progress %s: %s" % (note.tool_use_id,
                                     json.dumps(note.params["data"])))
    elif note.method == "tool_status":
        print("  %s %s" % (note.tool_use_id, note.params["status"]))
    elif note.method == "tool_result":
        meta = note.params["meta"]
        print("  result %s: %s, %d ms" % (note.tool_use_id, meta["reason"],
                                          meta["durationMs"]))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StexecError as e:
        print("stexecd: %s" % e, file=sys.stderr)
        sys.exit(1)
