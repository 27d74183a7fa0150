#!/usr/bin/env python3
"""
Claude Code's hooks run by the real stexecd (README, "Hooks"), with hook
scripts written the way users write them: bash with jq, Python reading
stdin. Operator hooks (--hooks) and a session's own (createSession hooks):
blocking, JSON decisions, ask, updatedInput, PostToolUse and its failure
twin, `if` and matchers, parallel hooks, an interrupt, a timeout, a
duplicate handler, SessionStart's CLAUDE_ENV_FILE, bad configuration.
Raw JSON-RPC, so that it tests the daemon.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_hooks.py
"""
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pydaemon  # noqa: E402
from pydaemon import Checks, Conn  # noqa: E402

T = Checks()
AREA = tempfile.mkdtemp(prefix="stexec-hooks-")
# One guard against a hang, never a bound under test (tests/README.md).
GUARD_S = pydaemon.scaled(60)


def script(name, text):
    path = os.path.join(AREA, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def command(path, *rest):
    return " ".join([path] + list(rest))


def hook(cmd, **more):
    h = {"type": "command", "command": cmd}
    h.update(more)
    return h


# The operator's policy: block rm -rf on Bash, log every call.
GUARD = script("block-rm.sh", r"""#!/bin/bash
cmd=$(jq -r '.tool_input.command // empty')
if echo "$cmd" | grep -qE 'rm[[:space:]]+-[a-zA-Z]*r[a-zA-Z]*f|rm[[:space:]]+-[a-zA-Z]*f[a-zA-Z]*r'; then
  echo "Blocked by policy: rm -rf is not allowed" >&2
  exit 2
fi
exit 0
""")
CALL_LOG = os.path.join(AREA, "calls.log")
LOGGER = script("log-call.sh", """#!/bin/bash
jq -c '{tool: .tool_name, id: .tool_use_id}' >> %s
""" % CALL_LOG)
OPERATOR = os.path.join(AREA, "managed-settings.json")


def session(c, root, hooks=None, **more):
    params = dict(cwd=root, **more)
    if hooks is not None:
        params["hooks"] = hooks
    return c.ok("createSession", **params)["sessionId"]


def one(c, sid, name, inp):
    (result, meta), = pydaemon.turn(c, sid, (name, inp))
    return result, meta


def fresh_root(name):
    d = os.path.join(AREA, name)
    os.makedirs(d)
    return d


def wait_for(cond, what):
    end = time.monotonic() + GUARD_S
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    T.check(False, "waited in vain for " + what)
    return None


def blocking(d):
    c = Conn(d.sock)
    root = fresh_root("blocking")
    victim = os.path.join(root, "x")
    os.makedirs(os.path.join(victim, "sub"))
    # The session asks for no hooks: the operator's still run.
    sid = session(c, root, hooks={})
    result, meta = one(c, sid, "bash", {"command": "rm -rf %s" % victim})
    T.check(result["is_error"], "rm -rf is an error result")
    T.check("Blocked by policy: rm -rf is not allowed" in result["content"],
            "the model reads the reason: %r" % result["content"])
    T.check(result["content"].startswith(
        "<tool_use_error>Hook PreToolUse:Bash denied this tool"),
        "in Claude Code's words: %r" % result["content"])
    T.eq(meta["reason"], "permission_denied", "meta.reason")
    T.check(os.path.isdir(victim), "the directory is still there")
    runs = meta["hooks"]["runs"]
    T.eq([(r["event"], r["command"], r["outcome"], r.get("decision"))
          for r in runs],
         [("PreToolUse", GUARD, "blocked", "deny"),
          ("PreToolUse", LOGGER, "ok", None)], "meta.hooks.runs")
    result, meta = one(c, sid, "bash", {"command": "ls %s" % victim})
    T.eq((result["content"], meta["reason"]), ("sub\n", "ok"),
         "the same guard lets ls through")
    c.ok("closeSession", sessionId=sid)
    c.close()


PROTECT = script("protect.py", r"""#!/usr/bin/env python3
import json, os, sys
ev = json.load(sys.stdin)
path = ev["tool_input"].get("file_path", "")
if os.path.basename(path) == ".env" or path.endswith(".lock"):
    json.dump({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "%s is protected" % os.path.basename(path)}},
        sys.stdout)
""")
ASK = script("ask-sql.py", r"""#!/usr/bin/env python3
import json, sys
ev = json.load(sys.stdin)
if "DROP TABLE" in ev["tool_input"].get("command", ""):
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "destructive SQL: a person must agree"}}))
""")
REWRITE = script("rewrite.sh", r"""#!/bin/bash
cmd=$(jq -r .tool_input.command)
case "$cmd" in
  "echo old"*) jq -n --arg c "echo new" '{hookSpecificOutput: {
      hookEventName: "PreToolUse", permissionDecision: "allow",
      updatedInput: {command: $c}}}' ;;
esac
""")


def notes(c, sid):
    return c.ok("events", sessionId=sid)["notifications"]


def json_decisions(d):
    c = Conn(d.sock)
    root = fresh_root("json")
    sid = session(c, root, hooks={"PreToolUse": [
        {"matcher": "Edit|Write", "hooks": [hook(PROTECT)]},
        {"matcher": "Bash", "hooks": [hook(ASK), hook(REWRITE)]}]})
    env = os.path.join(root, ".env")
    result, meta = one(c, sid, "write_file", {"file_path": env,
                                              "content": "SECRET=1\n"})
    T.check(result["is_error"] and ".env is protected" in result["content"],
            "a JSON deny protects .env: %r" % result["content"])
    T.check(not os.path.exists(env), ".env was not written")
    result, meta = one(c, sid, "write_file", {"file_path": "a.txt",
                                              "content": "fine\n"})
    T.eq(meta["reason"], "ok", "another file is written")
    # ask: a permission_request carrying the hook's reason; allow runs it.
    c.ok("addTool", sessionId=sid, toolUse={
        "id": "ask1", "name": "bash",
        "input": {"command": "echo 'DROP TABLE users' > sql.txt"}})
    req = wait_for(lambda: [n for n in notes(c, sid)
                            if n["method"] == "permission_request"
                            and n["params"]["toolUseId"] == "ask1"],
                   "the permission_request")
    if req:
        T.eq(req[0]["params"].get("reason"),
             "destructive SQL: a person must agree", "its reason")
        T.check(not os.path.exists(os.path.join(root, "sql.txt")),
                "nothing ran before the answer")
        c.ok("respondPermission", sessionId=sid, toolUseId="ask1",
             decision="allow")
    c.ok("drain", sessionId=sid)
    T.check(os.path.exists(os.path.join(root, "sql.txt")),
            "allowing it ran the tool")
    result, meta = one(c, sid, "bash", {"command": "echo old"})
    T.eq(result["content"], "new\n", "updatedInput's command is what ran")
    c.ok("closeSession", sessionId=sid)
    # A PermissionRequest hook answers for the client.
    sid = session(c, root, tools=[{
        "name": "deploy", "command": ["/bin/echo", "deployed", "{env}"],
        "requiresPermission": True, "hookName": "Deploy",
        "inputSchema": {"type": "object", "properties": {
            "env": {"type": "string"}}, "required": ["env"]}}],
        hooks={"PermissionRequest": [{"matcher": "Deploy", "hooks": [hook(
            "jq -r .tool_input.env | grep -qx staging && echo "
            "'{\"hookSpecificOutput\": {\"hookEventName\": "
            "\"PermissionRequest\", \"decision\": {\"behavior\": "
            "\"allow\"}}}'; exit 0")]}]})
    result, meta = one(c, sid, "deploy", {"env": "staging"})
    T.eq((result["content"], meta["reason"]), ("deployed staging\n", "ok"),
         "a PermissionRequest hook's allow runs it unasked")
    T.eq([n["method"] for n in notes(c, sid)
          if n["method"] == "permission_request"], [],
         "no permission_request was sent")
    c.ok("closeSession", sessionId=sid)
    c.close()


FORMAT = script("format.sh", r"""#!/bin/bash
f=$(jq -r .tool_input.file_path)
sed -i 's/[[:space:]]*$//' "$f"
jq -n --arg f "$(basename "$f")" '{hookSpecificOutput: {
  hookEventName: "PostToolUse",
  additionalContext: ("formatted " + $f)}}'
""")
FAILURE = script("failure.py", r"""#!/usr/bin/env python3
import json, sys
ev = json.load(sys.stdin)
with open(sys.argv[1], "w") as f:
    json.dump({"event": ev["hook_event_name"],
               "exit": ev["tool_response"]["exitCode"],
               "error": ev["error"], "tool": ev["tool_name"]}, f)
""")


def post(d):
    c = Conn(d.sock)
    root = fresh_root("post")
    seen = os.path.join(AREA, "failure.json")
    sid = session(c, root, hooks={
        "PostToolUse": [{"matcher": "Write", "hooks": [hook(FORMAT)]}],
        "PostToolUseFailure": [{"matcher": "Bash",
                                "hooks": [hook(command(FAILURE, seen))]}]})
    path = os.path.join(root, "f.py")
    result, meta = one(c, sid, "write_file", {"file_path": path,
                                              "content": "x = 1   \ny = 2\t\n"})
    with open(path) as f:
        T.eq(f.read(), "x = 1\ny = 2\n", "the file was formatted after Write")
    T.check("PostToolUse:Write hook additional context: formatted f.py"
            in result["content"], "the model reads the context: %r"
            % result["content"])
    T.eq(meta["hooks"].get("additionalContext"), "formatted f.py",
         "meta.hooks.additionalContext")
    c.ok("closeSession", sessionId=sid)
    # updatedToolOutput replaces the output; exit 2 adds a reason.
    sid = session(c, root, hooks={"PostToolUse": [{"matcher": "Bash",
        "hooks": [hook("jq -r .tool_response.stdout | grep -q SECRET && "
                       "jq -n '{hookSpecificOutput: {hookEventName: "
                       "\"PostToolUse\", updatedToolOutput: \"[redacted]\"}}'"
                       "; exit 0"),
                  hook("echo 'lint: 2 warnings' >&2; exit 2")]}],
        "PostToolUseFailure": [{"matcher": "Bash",
                                "hooks": [hook(command(FAILURE, seen))]}]})
    result, meta = one(c, sid, "bash", {"command": "echo SECRET=1"})
    T.eq(result["content"], "[redacted]\n<system-reminder>\nPostToolUse:"
         "Bash hook blocking error: lint: 2 warnings\n</system-reminder>",
         "updatedToolOutput and an exit-2 reason")
    T.eq([(r["outcome"], r.get("decision")) for r in meta["hooks"]["runs"]
          if r["event"] == "PostToolUse"],
         [("ok", None), ("blocked", "block")], "their runs")
    result, meta = one(c, sid, "bash", {"command": "echo no >&2; exit 3"})
    T.eq(meta["reason"], "exit", "the call failed")
    got = json.load(open(seen)) if os.path.exists(seen) else {}
    T.eq((got.get("event"), got.get("exit"), got.get("tool")),
         ("PostToolUseFailure", 3, "Bash"),
         "PostToolUseFailure sees the exit code")
    c.ok("closeSession", sessionId=sid)
    c.close()


def marker_hook(path):
    return script(os.path.basename(path) + ".sh", """#!/bin/bash
jq -r .tool_name >> %s
exit 2
""" % path)


def matching(d):
    c = Conn(d.sock)
    root = fresh_root("match")
    push = os.path.join(AREA, "push.log")
    edits = os.path.join(AREA, "edits.log")
    mcp = os.path.join(AREA, "mcp.log")
    sid = session(c, root, tools=[{
        "name": "mcp__srv__echo", "command": ["/bin/echo", "{text}"],
        "inputSchema": {"type": "object", "properties": {
            "text": {"type": "string"}}, "required": ["text"]}}],
        hooks={"PreToolUse": [
            {"matcher": "Bash", "hooks": [hook(marker_hook(push),
                                               **{"if": "Bash(git push *)"})]},
            {"matcher": "Edit.*", "hooks": [hook(marker_hook(edits))]},
            {"matcher": "mcp__.*", "hooks": [hook(marker_hook(mcp))]}]})
    result, meta = one(c, sid, "bash",
                       {"command": "npm test && git push origin"})
    T.check(result["is_error"] and meta["reason"] == "permission_denied",
            "if Bash(git push *) fires for npm test && git push origin")
    result, meta = one(c, sid, "bash", {"command": "git status >/dev/null"})
    T.eq(meta["reason"] in ("ok", "exit"), True,
         "...and not for git status: %r" % result["content"])
    T.eq(open(push).read(), "Bash\n", "the push hook ran once")
    open(os.path.join(root, "e.txt"), "w").write("a\n")
    one(c, sid, "edit_file", {"file_path": "e.txt", "old_string": "a",
                              "new_string": "b"})
    one(c, sid, "multi_edit", {"file_path": "e.txt", "edits": [
        {"old_string": "a", "new_string": "b"}]})
    one(c, sid, "write_file", {"file_path": "w.txt", "content": "w"})
    T.eq(open(edits).read() if os.path.exists(edits) else "",
         "Edit\nMultiEdit\n", "Edit.* matches Edit and MultiEdit, not Write")
    result, meta = one(c, sid, "mcp__srv__echo", {"text": "hi"})
    T.eq(open(mcp).read() if os.path.exists(mcp) else "",
         "mcp__srv__echo\n", "mcp__.* matches an mcp__ tool")
    c.ok("closeSession", sessionId=sid)
    c.close()


SLOW = script("slow.sh", r"""#!/bin/bash
id=$(jq -r .tool_use_id)
date +%s%N > "$1/$id.start"
sleep 1
date +%s%N > "$1/$id.end"
""")


def parallel(d):
    c = Conn(d.sock)
    root = fresh_root("parallel")
    stamps = os.path.join(AREA, "stamps")
    os.makedirs(stamps)
    open(os.path.join(root, "r.txt"), "w").write("r\n")
    sid = session(c, root, hooks={"PreToolUse": [
        {"matcher": "Read", "hooks": [hook(command(SLOW, stamps))]}]})
    results = pydaemon.turn(c, sid, ("read_file", {"file_path": "r.txt"}),
                            ("read_file", {"file_path": "r.txt"}))
    T.eq([m["reason"] for r, m in results], ["ok", "ok"], "both read")
    ids = sorted(f[:-6] for f in os.listdir(stamps) if f.endswith(".start"))
    T.eq(len(ids), 2, "two hooks ran")
    if len(ids) == 2:
        (a0, a1), (b0, b1) = [
            [int(open(os.path.join(stamps, i + s)).read()) for s in
             (".start", ".end")] for i in ids]
        T.check(a0 < b1 and b0 < a1, "the two safe tools' hooks overlapped")
    c.ok("closeSession", sessionId=sid)
    c.close()


HANG = script("hang.sh", r"""#!/bin/bash
sleep 300 &
echo $! > "$1"
wait
""")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def interrupt_and_timeout(d):
    c = Conn(d.sock)
    root = fresh_root("interrupt")
    pidfile = os.path.join(AREA, "hang.pid")
    sid = session(c, root, hooks={"PreToolUse": [
        {"matcher": "Bash", "hooks": [hook(command(HANG, pidfile))]},
        {"matcher": "Grep", "hooks": [hook("sleep 30; exit 2",
                                            timeout=0.5)]}]})
    c.ok("addTool", sessionId=sid, toolUse={
        "id": "hang1", "name": "bash", "input": {"command": "echo ran"}})
    pid = wait_for(lambda: os.path.exists(pidfile) and
                   open(pidfile).read().strip(), "the hook's child")
    st = c.ok("status", sessionId=sid)
    T.eq([t["status"] for t in st["tools"]], ["hooks"],
         "status shows the tool in its hook phase")
    cli = os.environ.get("STEXEC_CLI")
    if cli:
        env = dict(os.environ, STEXEC_SOCKET=d.sock)
        top = subprocess.run([cli, "top", "--once"], env=env,
                             capture_output=True, timeout=GUARD_S)
        rows = [l for l in top.stdout.decode().splitlines() if "hang1" in l]
        T.check(len(rows) == 1 and " hooks " in rows[0],
                "top shows the tool in its hook phase: %r" % top.stdout)
    c.ok("abort", sessionId=sid, reason="interrupt")
    c.ok("drain", sessionId=sid)
    res = [n["params"] for n in notes(c, sid)
           if n["method"] == "tool_result"]
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in res],
         [("hang1", "interrupted")], "the interrupted tool's result")
    if pid:
        T.check(wait_for(lambda: not alive(int(pid)), "the child's end"),
                "the hook's child was killed")
    result, meta = one(c, sid, "grep", {"pattern": "x", "path": root})
    T.check(not result["is_error"], "a timed-out exit-2 hook decides nothing")
    T.eq([r["outcome"] for r in meta["hooks"]["runs"]], ["ok", "timedOut"],
         "its run says timedOut (the operator's logger ran first)")
    c.ok("closeSession", sessionId=sid)
    c.close()


def duplicate_and_env(d):
    c = Conn(d.sock)
    root = fresh_root("dup")
    before = open(CALL_LOG).read().count("\n") if os.path.exists(
        CALL_LOG) else 0
    sid = session(c, root, hooks={
        "PreToolUse": [{"hooks": [hook(LOGGER)]}],
        "SessionStart": [{"hooks": [hook(
            "echo 'export FROM_HOOK=set-by-session-start' >> "
            "\"$CLAUDE_ENV_FILE\"")]}]})
    result, meta = one(c, sid, "bash", {"command": "echo $FROM_HOOK"})
    T.eq(result["content"], "set-by-session-start\n",
         "SessionStart's CLAUDE_ENV_FILE export is seen by the next bash")
    after = open(CALL_LOG).read().count("\n")
    T.eq(after - before, 1, "the operator's and the session's same "
         "handler ran once")
    c.ok("closeSession", sessionId=sid)
    # SessionEnd runs at closeSession; nothing waits for it.
    ended = os.path.join(AREA, "ended.json")
    sid = session(c, root, hooks={"SessionEnd": [{"hooks": [hook(
        "cat > %s" % ended)]}]})
    c.ok("closeSession", sessionId=sid)
    got = wait_for(lambda: os.path.exists(ended) and
                   open(ended).read().endswith("}") and
                   json.load(open(ended)), "SessionEnd's file")
    T.eq((got or {}).get("hook_event_name"), "SessionEnd", "SessionEnd ran")
    T.eq((got or {}).get("session_id"), sid, "...for that session")
    c.close()


def mcp_tools(d):
    """Hooks apply to an MCP server's tools, matched as mcp__SERVER__TOOL."""
    fake = os.path.join(HERE, "mcp_fake_server.py")
    if not os.path.exists(fake):
        return
    c = Conn(d.sock)
    root = fresh_root("mcp")
    sid = session(c, root, mcpServers={"fake": {
        "type": "stdio", "command": "python3", "args": [fake]}}, hooks={
        "PreToolUse": [{"matcher": "mcp__fake__.*", "hooks": [hook(
            "jq -r .tool_input.text | grep -q secret && "
            "{ echo 'no secrets to MCP servers' >&2; exit 2; }; exit 0")]}],
        "PostToolUse": [{"matcher": "mcp__.*", "hooks": [hook(
            "jq -n --arg t \"$(jq -r .tool_name)\" '{hookSpecificOutput: "
            "{hookEventName: \"PostToolUse\", additionalContext: "
            "(\"seen \" + $t)}}'")]}]})
    result, meta = one(c, sid, "mcp__fake__echo", {"text": "a secret"})
    T.check(result["is_error"] and "no secrets to MCP servers" in
            str(result["content"]), "a PreToolUse guard blocks an MCP call: "
            "%r" % result["content"])
    result, meta = one(c, sid, "mcp__fake__echo", {"text": "hello"})
    T.check("echo: hello" in str(result["content"]) and
            "hook additional context: seen mcp__fake__echo" in
            str(result["content"]), "PostToolUse on an MCP tool: %r"
            % result["content"])
    c.ok("closeSession", sessionId=sid)
    c.close()


def readme_policy(d):
    """The README's policy is a configuration the daemon takes."""
    with open(os.path.join(HERE, "..", "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Hooks"):]
    block = section[section.index("```json\n") + 8:]
    policy = json.loads(block[:block.index("```")])
    c = Conn(d.sock)
    r = c.call("createSession", hooks=policy["hooks"])
    T.check("result" in r, "the README's policy is taken: %r" % r)
    if "result" in r:
        c.ok("closeSession", sessionId=r["result"]["sessionId"])
    c.close()


def bad_config(d):
    c = Conn(d.sock)
    for hooks, field in (
            ({"PreToolUse": [{"hooks": [{"type": "command", "command": "x",
                                          "timeout": -1}]}]},
             "hooks.PreToolUse[0].hooks[0].timeout"),
            ({"PreToolUse": [{"hooks": [{"type": "prompt",
                                          "prompt": "ok?"}]}]},
             "hooks.PreToolUse[0].hooks[0].type"),
            ({"PostToolUse": [{"matcher": "(", "hooks": []}]},
             "hooks.PostToolUse[0].matcher"),
            ([], "hooks")):
        e = c.call("createSession", hooks=hooks)
        err = e.get("error", {})
        T.eq((err.get("code"), err.get("data")), (-32602, {"field": field}),
             "createSession hooks=%.60r" % (hooks,))
    c.close()
    bad = os.path.join(AREA, "bad.json")
    with open(bad, "w") as f:
        json.dump({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "a"},
            {"type": "command", "command": "b", "timeout": 0}]}]}}, f)
    p = subprocess.run([d.path, "--socket", os.path.join(AREA, "x.sock"),
                        "--hooks", OPERATOR, "--hooks", bad],
                       stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=GUARD_S)
    T.check(p.returncode != 0, "a bad --hooks file stops the start")
    T.check(("%s: hooks.PreToolUse[0].hooks[1].timeout: must be a positive "
             "number" % bad).encode() in p.stderr,
            "naming the file and the place: %r" % p.stderr)


class Peer:
    """A connection that keeps what it reads: responses by id,
    notifications in order (a client that serves tools reads both)."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.buf = b""
        self.rid = 0
        self.responses = {}
        self.notes = []

    def pump(self):
        r, _, _ = select.select([self.s], [], [], GUARD_S)
        if not r:
            raise AssertionError("nothing came from the daemon")
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
                self.notes.append(msg)

    def ok(self, method, **params):
        self.rid += 1
        rid = self.rid
        self.s.sendall((json.dumps({"jsonrpc": "2.0", "id": rid,
                                    "method": method, "params": params})
                        + "\n").encode())
        while rid not in self.responses:
            self.pump()
        msg = self.responses.pop(rid)
        if "error" in msg:
            raise AssertionError("%s: %s" % (method, msg["error"]))
        return msg["result"]

    def note(self, method):
        while True:
            for i, n in enumerate(self.notes):
                if n.get("method") == method:
                    return self.notes.pop(i)["params"]
            self.pump()


def client_tools(d):
    """Hooks apply to a client-run tool as to any other."""
    root = fresh_root("client")
    c = Peer(d.sock)
    sid = c.ok("createSession", cwd=root, tools=[
        {"name": "TodoWrite", "runner": "client"}], hooks={
        "PreToolUse": [{"matcher": "TodoWrite", "hooks": [hook(
            "jq -e '.tool_input.todos == []' >/dev/null && "
            "{ echo 'an empty todo list' >&2; exit 2; }; exit 0")]}],
        "PostToolUse": [{"matcher": "TodoWrite", "hooks": [hook(
            "jq -n --arg c \"$(jq -r .tool_response.content)\" "
            "'{hookSpecificOutput: {hookEventName: \"PostToolUse\", "
            "additionalContext: (\"saw \" + $c)}}'")]}]})["sessionId"]
    c.ok("subscribe", sessionId=sid)
    c.ok("serveTools", sessionId=sid, names=["TodoWrite"])
    c.ok("addTool", sessionId=sid, toolUse={"id": "c1", "name": "TodoWrite",
                                            "input": {"todos": []}})
    r = c.note("tool_result")
    T.check(r["result"]["is_error"] and "an empty todo list" in
            r["result"]["content"], "a PreToolUse guard blocks a client-run "
            "tool: %r" % r["result"]["content"])
    T.eq([n["method"] for n in c.notes if n["method"] == "tool_start"], [],
         "the client was never asked to run it")
    c.ok("addTool", sessionId=sid, toolUse={"id": "c2", "name": "TodoWrite",
                                            "input": {"todos": ["x"]}})
    start = c.note("tool_start")
    T.eq(start["toolUseId"], "c2", "the allowed call starts")
    c.ok("completeTool", sessionId=sid, toolUseId="c2", content="listed")
    r = c.note("tool_result")
    T.check("PostToolUse:TodoWrite hook additional context: saw listed" in
            r["result"]["content"], "PostToolUse saw the client's result: %r"
            % r["result"]["content"])
    c.ok("closeSession", sessionId=sid)
    c.s.close()


def operators(d):
    c = Conn(d.sock)
    fams = {f["name"]: f for f in c.ok("metrics")["metrics"]}
    runs = {s["labels"]["outcome"]: s["value"]
            for s in fams["stexec_hook_runs_total"]["samples"]}
    T.check(runs.get("blocked", 0) >= 2 and runs.get("ok", 0) >= 10 and
            runs.get("timedOut", 0) >= 1 and runs.get("killed", 0) >= 1,
            "metrics count runs by outcome: %r" % runs)
    T.eq(fams["stexec_hooks_running"]["samples"][0]["value"], 0,
         "no hook runs now")
    c.close()
    log = open(os.path.join(d.tmp, "daemon.log"), errors="replace").read()
    T.check(("hook PreToolUse: %s: blocked, deny" % GUARD) in log,
            "a log line for the blocking run")


def sandbox_floor(d):
    """Under --min-sandbox a session's own hooks, which would run outside
    the sandbox, are refused; the operator's still run."""
    d2 = pydaemon.Daemon(d.path, ["--min-sandbox", "workspace-write",
                                  "--hooks", OPERATOR])
    d2.start()
    try:
        end = time.monotonic() + GUARD_S
        while (not os.path.exists(d2.sock) and d2.proc.poll() is None
               and time.monotonic() < end):
            time.sleep(0.05)
        if d2.proc.poll() is not None:
            print("no --min-sandbox on this kernel: that check skipped")
            return
        c = Conn(d2.sock)
        e = c.call("createSession", hooks={})
        T.eq((e.get("error", {}).get("code"), e.get("error", {}).get("data")),
             (-32602, {"field": "hooks"}), "session hooks under a floor")
        root = fresh_root("floor")
        sid = c.ok("createSession", cwd=root)["sessionId"]
        result, meta = one(c, sid, "bash", {"command": "rm -rf %s" % root})
        T.check("Blocked by policy" in result["content"],
                "the operator's hooks still run: %r" % result["content"])
        c.ok("closeSession", sessionId=sid)
        c.close()
        T.eq(d2.leftovers(), [], "nothing left by the second daemon")
    finally:
        d2.stop()
        shutil.rmtree(d2.tmp, ignore_errors=True)


def reload(d):
    """A reload (SIGHUP) while hooks run: a tool caught before its call
    starts again, hooks and all; one caught in PostToolUse keeps its
    result; no hook process is left."""
    c = Conn(d.sock)
    root = fresh_root("reload")
    started = os.path.join(AREA, "pre-started")
    # Each hook runs until the test lets it go (a file), not for a guessed
    # second: on a loaded machine the reload may take longer than that,
    # and the hook must still be running when it comes.
    sid = session(c, root, hooks={
        "PreToolUse": [{"matcher": "Glob", "hooks": [hook(
            "echo x >> %s; until [ -e %s.go ]; do sleep 0.02; done" % (
                started, started))]}],
        "PostToolUse": [{"matcher": "LS", "hooks": [hook(
            "touch %s.post; until [ -e %s.post.go ]; do sleep 0.02; done" % (
                started, started))]}]})
    c.ok("addTool", sessionId=sid, toolUse={"id": "r1", "name": "glob",
                                            "input": {"pattern": "*"}})
    # Its line written, not only its file made: the shell opens the file
    # before it writes, and a reload between the two kills the first run
    # before it has said so.
    wait_for(lambda: read_or_empty(started) == "x\n", "the PreToolUse hook")
    c = sighup(d, c)
    open(started + ".go", "w").close()
    c.ok("drain", sessionId=sid)
    res = [n["params"] for n in notes(c, sid) if n["method"] == "tool_result"]
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in res],
         [("r1", "ok")], "the tool caught in PreToolUse ran after the reload")
    T.eq(open(started).read(), "x\nx\n", "its hooks ran again")
    c.ok("addTool", sessionId=sid, toolUse={"id": "r2", "name": "list_dir",
                                            "input": {"path": root}})
    wait_for(lambda: os.path.exists(started + ".post"), "the PostToolUse hook")
    c = sighup(d, c)
    open(started + ".post.go", "w").close()
    c.ok("drain", sessionId=sid)
    res = [n["params"] for n in notes(c, sid) if n["method"] == "tool_result"]
    T.eq([(r["toolUseId"], r["meta"]["reason"]) for r in res][-1:],
         [("r2", "ok")], "the tool caught in PostToolUse kept its result")
    c.ok("closeSession", sessionId=sid)
    c.close()


def restart(d):
    """After a crash, the sessions made again keep their hooks: their own
    (journaled) and the operator's."""
    d3 = pydaemon.Daemon(d.path, ["--hooks", OPERATOR])
    d3.start()
    try:
        wait_for(lambda: reconnect(d3), "the third daemon")
        c = Conn(d3.sock)
        root = fresh_root("restart")
        sid = session(c, root, hooks={"PreToolUse": [{"matcher": "Bash",
            "hooks": [hook("grep -q 'echo own' && exit 2; exit 0")]}]})
        c.close()
        d3.proc.kill()
        d3.proc.wait()
        d3.log.close()
        d3.start()
        c = wait_for(lambda: reconnect(d3), "the restarted daemon")
        result, meta = one(c, sid, "bash", {"command": "echo own"})
        T.eq(meta["reason"], "permission_denied",
             "the session's own hook after a restart")
        result, meta = one(c, sid, "bash", {"command": "rm -rf %s" % root})
        T.check("Blocked by policy" in result["content"],
                "the operator's hook after a restart: %r" % result["content"])
        T.check(os.path.isdir(root), "and nothing was removed")
        c.ok("closeSession", sessionId=sid)
        c.close()
        T.eq(d3.leftovers(), [], "nothing left by the restarted daemon")
    finally:
        d3.stop()
        shutil.rmtree(d3.tmp, ignore_errors=True)


def read_or_empty(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def reconnect(d, old_image=None):
    """A connection once the daemon serves, from an image other than
    old_image when one is given."""
    try:
        c = Conn(d.sock)
        if c.ok("initialize")["server"].get("instance") != old_image:
            return c
        c.close()
    except (OSError, ValueError):  # refused, or closed mid-call
        pass
    return None


def sighup(d, c):
    """Reload the daemon and return a connection to the new image. The
    old image serves until it hands over, so a connection alone does not
    say the reload is done."""
    before = c.ok("initialize")["server"]["instance"]
    d.proc.send_signal(signal.SIGHUP)
    c.close()
    return wait_for(lambda: reconnect(d, before), "the reloaded daemon")


def body(d):
    end = time.monotonic() + GUARD_S
    while not os.path.exists(d.sock) and time.monotonic() < end:
        time.sleep(0.05)
    blocking(d)
    json_decisions(d)
    post(d)
    matching(d)
    parallel(d)
    interrupt_and_timeout(d)
    duplicate_and_env(d)
    bad_config(d)
    readme_policy(d)
    client_tools(d)
    mcp_tools(d)
    sandbox_floor(d)
    operators(d)
    reload(d)
    restart(d)


if __name__ == "__main__":
    with open(OPERATOR, "w") as f:
        json.dump({"permissions": {"allow": ["Bash(ls *)"]}, "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [hook(GUARD)]},
                {"matcher": "*", "hooks": [hook(LOGGER)]}]}}, f)
    try:
        # STEXEC_DAEMON_ARGS: the suite's --no-cgroup twin.
        rc = pydaemon.run(T, body, ["--hooks", OPERATOR] + os.environ.get(
            "STEXEC_DAEMON_ARGS", "").split())
    finally:
        shutil.rmtree(AREA, ignore_errors=True)
    sys.exit(rc)
