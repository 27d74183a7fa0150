#!/usr/bin/env python3
"""
Drive a real stexecd through every method of the wire protocol and check
every line it sends against protocol/schemas/ (JSON Schema 2020-12):
responses by the method of the request with that id, errors against the
error schema, notifications against the notification schema. Also checks the
semantics protocol/PROTOCOL.md promises to clients (result order, progress
before results, seq without gaps, result contents, error codes).

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_wire_schemas.py

Exit 0 on success, 1 on failure, 77 (skip) when STEXEC_DAEMON is unset.
Needs python3-jsonschema.
"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pydaemon import scaled  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.join(HERE, "..", "protocol", "schemas")
SCHEMA_BASE = "https://stexec.invalid/schemas/v1/"
WAIT = scaled(float(os.environ.get("STEXEC_TEST_WAIT", "20")))
INTERRUPTED = "<tool_use_error>Interrupted by user</tool_use_error>"


class Timeout(Exception):
    pass


class Schemas:
    """The schema files, checked themselves, and validators that resolve
    the references between them (jsonschema 4.10 and later)."""

    def __init__(self):
        self.docs = {}
        for name in ("tooldef", "request", "response", "error",
                     "notification"):
            path = os.path.join(SCHEMA_DIR, name + ".schema.json")
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            jsonschema.Draft202012Validator.check_schema(doc)
            self.docs[name] = doc
        self.cache = {}

    def validator(self, schema):
        cls = jsonschema.Draft202012Validator
        try:
            from referencing import Registry, Resource
            from referencing.jsonschema import DRAFT202012
        except ImportError:
            store = {d["$id"]: d for d in self.docs.values()}
            resolver = jsonschema.RefResolver.from_schema(schema, store=store)
            return cls(schema, resolver=resolver)
        registry = Registry().with_resources(
            (d["$id"], Resource.from_contents(
                d, default_specification=DRAFT202012))
            for d in self.docs.values())
        return cls(schema, registry=registry)

    def get(self, key):
        """key: a schema name, or "result:METHOD"."""
        if key not in self.cache:
            if key.startswith("result:"):
                method = key[len("result:"):]
                defs = self.docs["response"]["$defs"]
                if method + "Result" not in defs:
                    raise KeyError("response.schema.json has no $defs/%s"
                                   "Result" % method)
                schema = {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$id": SCHEMA_BASE + "result-" + method + ".json",
                    "$ref": "response.schema.json#/$defs/" + method +
                            "Result",
                }
            else:
                schema = self.docs[key]
            self.cache[key] = self.validator(schema)
        return self.cache[key]

    def errors(self, key, value):
        out = []
        for e in sorted(self.get(key).iter_errors(value),
                        key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            out.append("%s at %s (schema %s)" % (
                e.message[:300], where,
                "/".join(str(p) for p in e.absolute_schema_path)))
        return out


class Test:
    def __init__(self, daemon):
        self.daemon = os.path.abspath(daemon)
        self.schemas = Schemas()
        self.failures = []
        self.next_id = 0
        self.methods = {}       # request id -> method (None: error expected)
        self.lines = 0
        self.tmp = tempfile.mkdtemp(prefix="stexec-wire-")
        self.sock = os.path.join(self.tmp, "s.sock")
        self.outdir = os.path.join(self.tmp, "out")
        self.proc = None
        self.conns = []

    # ------------------------------------------------------------ reporting

    def fail(self, what):
        self.failures.append(what)
        print("FAIL: " + what, file=sys.stderr, flush=True)

    def expect(self, cond, what):
        if not cond:
            self.fail(what)
        return cond

    def validate(self, key, value, label):
        errs = self.schemas.errors(key, value)
        for e in errs:
            self.fail("%s: against %s: %s" % (label, key, e))
        return not errs

    # ------------------------------------------------------------ daemon

    def start(self):
        env = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                  "LISTEN_FDNAMES", "STEXEC_SOCKET"):
            env.pop(k, None)
        self.log = open(os.path.join(self.tmp, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            [self.daemon, "--socket", self.sock, "--output-dir", self.outdir,
             "--state-dir", self.outdir + ".state",
             # Room over the 50 ms default, which a loaded machine can overrun.
             "--pattern-deadline-ms", "10000"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            cwd=self.tmp, env=env)
        deadline = time.monotonic() + scaled(10)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("the daemon exited with %d before serving"
                                   % self.proc.returncode)
            if os.path.exists(self.sock):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.sock)
                    s.close()
                    return
                except OSError:
                    s.close()
            if time.monotonic() > deadline:
                raise RuntimeError("no socket at %s after 10 s" % self.sock)
            time.sleep(0.02)

    def stop(self):
        for c in self.conns:
            c.close()
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.fail("the daemon had already exited with %d" %
                          self.proc.returncode)
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=scaled(15))
        except subprocess.TimeoutExpired:
            self.fail("the daemon did not exit within 15 s of SIGTERM")
            self.proc.kill()
            self.proc.wait()
            return
        self.expect(rc == 0, "the daemon exited with %d after SIGTERM, "
                    "want 0" % rc)

    def daemon_log_tail(self, n=40):
        try:
            with open(os.path.join(self.tmp, "daemon.log"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    # ------------------------------------------------------------ lines

    def request_id(self, method):
        self.next_id += 1
        self.methods[self.next_id] = method
        return self.next_id

    def record(self, conn, raw):
        """Check one line the daemon sent; return the parsed message."""
        self.lines += 1
        shown = raw[:400].decode("utf-8", "replace")
        label = "line %d on %s %s" % (self.lines, conn.name, shown +
                                      ("…" if len(raw) > 400 else ""))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail("%s: not UTF-8: %s" % (label, e))
            return None
        try:
            msg = json.loads(text)
        except ValueError as e:
            self.fail("%s: not JSON: %s" % (label, e))
            return None
        if not isinstance(msg, dict):
            self.fail("%s: not a JSON object" % label)
            return None
        if "method" in msg and "id" not in msg:
            self.validate("notification", msg, label)
            conn.on_notification(msg, label)
        elif "error" in msg:
            self.validate("error", msg, label)
        elif "result" in msg:
            self.validate("response", msg, label)
            mid = msg.get("id")
            if mid not in self.methods:
                self.fail("%s: a response to id %r, which was never sent" %
                          (label, mid))
            elif self.methods[mid] is None:
                self.fail("%s: a result for a request that must fail" %
                          label)
            else:
                self.validate("result:" + self.methods[mid],
                              msg["result"], label + " (result of " +
                              self.methods[mid] + ")")
        else:
            self.fail("%s: neither a response, an error nor a notification"
                      % label)
        return msg


class Conn:
    """One client connection: every line received is recorded in msgs."""

    def __init__(self, t, name):
        self.t = t
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(t.sock)
        self.buf = b""
        self.msgs = []
        self.eof = False
        self.seq = {}        # sessionId -> next seq expected while subscribed
        self.notes = []      # every notification, in arrival order
        t.conns.append(self)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def on_notification(self, msg, label):
        p = msg.get("params")
        if not isinstance(p, dict):
            return
        self.notes.append(msg)
        sid = p.get("sessionId")
        if sid in self.seq:
            self.t.expect(p.get("seq") == self.seq[sid],
                          "%s: seq %r, want %r (no gaps, no reordering)" %
                          (label, p.get("seq"), self.seq[sid]))
            if isinstance(p.get("seq"), int):
                self.seq[sid] = p["seq"] + 1

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, params=None, validate=True, expect_error=False):
        rid = self.t.request_id(None if expect_error else method)
        req = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = params
        if validate:
            errs = self.t.schemas.errors("request", req)
            for e in errs:
                self.t.fail("request %s (a bug in this test or the "
                            "request schema): %s" % (json.dumps(req), e))
        self.send_raw(json.dumps(req).encode() + b"\n")
        return rid

    def read_one(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("%s: nothing more within %.0f s" %
                              (self.name, WAIT))
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            if not data:
                self.eof = True
                if self.buf:
                    self.t.fail("%s: the connection ended inside a line: %r"
                                % (self.name, self.buf[:200]))
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        msg = self.t.record(self, line)
        if msg is not None:
            self.msgs.append(msg)
        return msg

    def wait(self, pred, start=0, timeout=None, what="a message"):
        deadline = time.monotonic() + (timeout or WAIT)
        i = start
        while True:
            while i < len(self.msgs):
                if pred(self.msgs[i]):
                    return self.msgs[i]
                i += 1
            if self.eof:
                raise Timeout("%s: connection closed while waiting for %s"
                              % (self.name, what))
            try:
                self.read_one(deadline)
            except Timeout:
                raise Timeout("%s: timed out waiting for %s" %
                              (self.name, what))

    def response(self, rid, method="?"):
        return self.wait(lambda m: m.get("id") == rid and
                         ("result" in m or "error" in m),
                         what="the response to %s (id %d)" % (method, rid))

    def call(self, method, params=None):
        rid = self.send(method, params)
        m = self.response(rid, method)
        if "error" in m:
            self.t.fail("%s %s: error %s" % (method, json.dumps(params),
                                              json.dumps(m["error"])))
            return None
        return m["result"]

    def call_error(self, method, params, code, field=None, validate=False):
        rid = self.send(method, params, validate=validate, expect_error=True)
        m = self.response(rid, method)
        label = "%s %s" % (method, json.dumps(params)[:200])
        if "error" not in m:
            self.t.fail("%s: want error %d, got result %s" %
                        (label, code, json.dumps(m.get("result"))[:200]))
            return None
        err = m["error"]
        self.t.expect(err.get("code") == code, "%s: error code %r, want %d "
                      "(%s)" % (label, err.get("code"), code,
                                err.get("message")))
        if field is not None and err.get("code") == code:
            got = (err.get("data") or {}).get("field")
            ok = (got == field if not field.endswith("*")
                  else isinstance(got, str) and got.startswith(field[:-1]))
            self.t.expect(ok, "%s: data.field %r, want %r" %
                          (label, got, field))
        return err

    def note(self, pred, start=0, what="a notification"):
        return self.wait(lambda m: "method" in m and "id" not in m and
                         pred(m["method"], m.get("params") or {}),
                         start=start, what=what)

    def result_of(self, tid, start=0):
        return self.note(lambda me, p: me == "tool_result" and
                         p.get("toolUseId") == tid, start=start,
                         what="the tool_result of " + tid)["params"]


def sh_tool(name, **kw):
    d = {
        "name": name,
        "description": "run a shell script (test tool %s)" % name,
        "command": ["/bin/sh", "-c", "{script}"],
        "inputSchema": {
            "type": "object",
            "properties": {"script": {"type": "string"},
                           "timeout": {"type": "integer", "minimum": 1}},
            "required": ["script"],
            "additionalProperties": False,
        },
    }
    d.update(kw)
    return d


class Scenario:
    def __init__(self, t):
        self.t = t
        self.adds = {}          # (sid, turn) -> [toolUseId] in add order
        self.checked = set()    # (sid, turn) whose order conn A must show
        self.no_results = set()  # (sid, turn) discarded: no results at all

    def add(self, conn, sid, tid, name, inp, safe=None, status=None):
        r = conn.call("addTool", {"sessionId": sid, "toolUse": {
            "type": "tool_use", "id": tid, "name": name, "input": inp}})
        if r is None:
            return None
        t = self.t
        t.expect(r.get("toolUseId") == tid, "addTool %s: toolUseId %r" %
                 (tid, r.get("toolUseId")))
        if safe is not None:
            t.expect(r.get("concurrencySafe") is safe,
                     "addTool %s: concurrencySafe %r, want %r" %
                     (tid, r.get("concurrencySafe"), safe))
        if status is not None:
            t.expect(r.get("status") in status, "addTool %s: status %r, "
                     "want one of %s" % (tid, r.get("status"), status))
        self.adds.setdefault((sid, r.get("turn")), []).append(tid)
        return r

    def drain(self, conn, sid, turn, results):
        r = conn.call("drain", {"sessionId": sid})
        if r is not None:
            self.t.expect(r == {"turn": turn, "results": results},
                          "drain: %s, want turn %d results %d" %
                          (json.dumps(r), turn, results))
        return r

    def check_result(self, p, reason, content=None, prefix=None):
        t = self.t
        tid = p.get("toolUseId")
        meta = p.get("meta", {})
        res = p.get("result", {})
        t.expect(meta.get("reason") == reason, "%s: reason %r, want %r "
                 "(content %r)" % (tid, meta.get("reason"), reason,
                                   res.get("content", "")[:200]))
        if content is not None:
            t.expect(res.get("content") == content, "%s: content %r, want %r"
                     % (tid, res.get("content"), content))
        if prefix is not None:
            t.expect(str(res.get("content")).startswith(prefix),
                     "%s: content %r, want it to start with %r" %
                     (tid, res.get("content"), prefix))

    # ------------------------------------------------------------ the run

    def run(self):
        t = self.t
        work = os.path.join(t.tmp, "work")
        os.makedirs(os.path.join(work, "sub"))
        with open(os.path.join(work, "a.txt"), "w") as f:
            f.write("alpha\n")
        with open(os.path.join(work, "b.txt"), "w") as f:
            f.write("beta\n")

        A = Conn(t, "A")
        E = Conn(t, "E")

        # initialize, ping, listTools without a session
        init = A.call("initialize", {"client": {"name": "test_wire_schemas",
                                                "version": "1"}})
        max_message = 4 * 1024 * 1024
        if init:
            t.expect(init.get("protocolVersion") == 1, "protocolVersion")
            t.expect(init.get("server", {}).get("name") == "stexecd",
                     "server.name %r" % init.get("server"))
            max_message = init.get("capabilities", {}).get("maxMessage",
                                                           max_message)
            jobs = init.get("capabilities", {}).get("jobs")
            t.expect(jobs == {"maxPerSession": 64, "outputBytes": 4194304},
                     "capabilities.jobs %r, want the defaults" % (jobs,))
        t.expect(A.call("ping") == {}, "ping result")
        t.expect(A.call("ping", {}) == {}, "ping {} result")
        tools = A.call("listTools") or {"tools": []}
        names = {d.get("name") for d in tools["tools"]}
        for n in ("bash", "read_file", "write_file", "glob", "grep",
                  "list_dir", "bash_output", "kill_shell"):
            t.expect(n in names, "listTools: no built-in tool %s" % n)

        # createSession with session tools
        session_tools = [
            sh_tool("sh", interruptBehavior="cancel",
                    timeoutFromInput="timeout",
                    env={"TOOLVAR": "from-tooldef"}),
            sh_tool("sh_block"),
            sh_tool("safe_block", concurrencySafe=True),
            sh_tool("safe_cancel", concurrencySafe=True,
                    interruptBehavior="cancel"),
            sh_tool("rule_safe", concurrencySafe={"pointer": "/script",
                                                  "pattern": "^echo "}),
            sh_tool("guarded", requiresPermission=True),
            sh_tool("streamer", streamOutput=True, maxResultBytes=256),
            sh_tool("slowpoke", timeoutMs=300, interruptBehavior="cancel"),
            {"name": "missing", "command": ["/nonexistent/stexec-test-prog"]},
            {
                "name": "failer",
                "command": ["/bin/sh", "-c", "{command}"],
                "inputSchema": {"type": "object", "properties": {
                    "command": {"type": "string"}}, "required": ["command"]},
                "interruptBehavior": "cancel",
                "abortSiblingsOnError": True,
            },
        ]
        for d in session_tools:
            t.validate("tooldef", d, "session tool %s (test bug)" % d["name"])
        cs = A.call("createSession", {
            "tools": session_tools, "maxParallel": 4, "cwd": work,
            "env": {"STEXEC_TEST": "one", "HOME": None}})
        if cs is None:
            raise RuntimeError("createSession failed; cannot go on")
        sid = cs["sessionId"]

        lt = A.call("listTools", {"sessionId": sid}) or {"tools": []}
        by_name = {d.get("name"): d for d in lt["tools"]}
        for d in session_tools:
            t.expect(d["name"] in by_name, "listTools {sessionId}: no "
                     "session tool %s" % d["name"])
        t.expect("bash" in by_name, "listTools {sessionId}: no bash")
        if "missing" in by_name:
            want = {"name": "missing", "description": "",
                    "command": ["/nonexistent/stexec-test-prog"],
                    "inputSchema": {"type": "object"},
                    "concurrencySafe": False, "interruptBehavior": "block",
                    "abortSiblingsOnError": False,
                    "requiresPermission": False, "timeoutMs": 120000,
                    "maxTimeoutMs": 600000, "timeoutFromInput": None,
                    "maxResultBytes": 100000, "streamOutput": False,
                    "env": {}}
            t.expect(by_name["missing"] == want, "listTools: defaults of a "
                     "minimal ToolDef: %s, want %s" %
                     (json.dumps(by_name["missing"]), json.dumps(want)))
        ls = A.call("listSessions") or {"sessions": []}
        mine = [s for s in ls["sessions"] if s.get("sessionId") == sid]
        t.expect(mine == [{"sessionId": sid, "turn": 1, "unfinished": 0}],
                 "listSessions: %s" % json.dumps(ls))

        sub = A.call("subscribe", {"sessionId": sid, "since": 0})
        t.expect(sub == {"lastSeq": 0}, "subscribe on a new session: %s" %
                 json.dumps(sub))
        A.seq[sid] = 1

        self.errors(E, sid, max_message)

        # ---- turn 1: built-ins in parallel, unknown tool, invalid input,
        # fd 3 progress, context modifiers, the tool environment
        turn = 1
        self.checked.add((sid, turn))
        self.add(A, sid, "r1", "read_file",
                 {"file_path": os.path.join(work, "a.txt")}, safe=True)
        self.add(A, sid, "r2", "read_file",
                 {"file_path": os.path.join(work, "b.txt")}, safe=True)
        self.add(A, sid, "b1", "bash", {"command":
                 "echo hello from bash; "
                 "printf '{\"progress\":{\"step\":1}}\\n' >&3"}, safe=False)
        self.add(A, sid, "u1", "no_such_tool", {"x": 1}, safe=False,
                 status=("completed", "delivered"))
        self.add(A, sid, "i1", "read_file", {}, safe=False)
        self.add(A, sid, "s1", "sh", {"script":
                 "printf '{\"progress\":{\"pct\":50}}\\n' >&3; "
                 "echo 'plain line' >&3; "
                 "printf '{\"context\":{\"cwd\":\"sub\",\"env\":"
                 "{\"CTX_VAR\":\"ctx\",\"STEXEC_TEST\":null}}}\\n' >&3; "
                 "echo \"$STEXEC_SESSION_ID|$STEXEC_TOOL_USE_ID|"
                 "$STEXEC_PROGRESS_FD|${STEXEC_TEST-unset}|"
                 "${TOOLVAR-unset}|${HOME-unset}\"; echo err >&2"},
                 safe=False)
        self.add(A, sid, "s2", "sh", {"script":
                 "pwd -P; echo \"${CTX_VAR-unset}|${STEXEC_TEST-unset}\""})
        A.call_error("addTool", {"sessionId": sid, "toolUse": {
            "id": "r1", "name": "read_file", "input": {}}}, -32002,
            validate=True)
        st = A.call("status", {"sessionId": sid})
        if st:
            t.expect(st.get("turn") == turn and
                     [x.get("id") for x in st.get("tools", [])] ==
                     ["r1", "r2", "b1", "u1", "i1", "s1", "s2"],
                     "status: %s" % json.dumps(st))
        self.drain(A, sid, turn, 7)
        res = {tid: A.result_of(tid) for tid in
               ("r1", "r2", "b1", "u1", "i1", "s1", "s2")}
        self.check_result(res["r1"], "ok")
        t.expect("alpha" in res["r1"]["result"]["content"],
                 "read_file a.txt: %r" % res["r1"]["result"]["content"])
        self.check_result(res["r2"], "ok")
        self.check_result(res["b1"], "ok", content="hello from bash\n")
        self.check_result(res["u1"], "unknown_tool", content=(
            "<tool_use_error>Error: No such tool available: no_such_tool"
            "</tool_use_error>"))
        self.check_result(res["i1"], "invalid_input",
                          prefix="<tool_use_error>InputValidationError: ")
        self.check_result(res["s1"], "ok", content=(
            "%s|s1|3|one|from-tooldef|unset\nerr\n" % sid))
        self.check_result(res["s2"], "ok", content=(
            "%s\nctx|unset\n" % os.path.realpath(os.path.join(work, "sub"))))
        prog = [n["params"]["data"] for n in A.notes
                if n["method"] == "progress" and
                n["params"].get("toolUseId") == "s1"]
        t.expect(prog == [{"pct": 50}, {"text": "plain line"}],
                 "progress of s1: %s" % json.dumps(prog))
        prog = [n["params"]["data"] for n in A.notes
                if n["method"] == "progress" and
                n["params"].get("toolUseId") == "b1"]
        t.expect(prog == [{"step": 1}], "progress of b1: %s" %
                 json.dumps(prog))
        A.note(lambda me, p: me == "turn_end" and p.get("turn") == 1 and
               p.get("reason") == "drained", what="turn_end of turn 1")

        # ---- turn 2: permissions
        turn = 2
        self.checked.add((sid, turn))
        mark = len(A.msgs)
        self.add(A, sid, "p1", "guarded", {"script": "echo allowed"},
                 status=("waiting_permission",))
        pr = A.note(lambda me, p: me == "permission_request" and
                    p.get("toolUseId") == "p1", start=mark,
                    what="permission_request p1")["params"]
        t.expect(pr.get("name") == "guarded" and
                 pr.get("input") == {"script": "echo allowed"},
                 "permission_request: %s" % json.dumps(pr))
        st = A.call("status", {"sessionId": sid})
        if st:
            t.expect([x.get("status") for x in st.get("tools", [])] ==
                     ["waiting_permission"], "status while waiting for "
                     "permission: %s" % json.dumps(st))
        t.expect(A.call("respondPermission", {
            "sessionId": sid, "toolUseId": "p1", "decision": "allow"}) == {},
            "respondPermission allow result")
        self.check_result(A.result_of("p1", mark), "ok", content="allowed\n")
        A.call_error("respondPermission", {"sessionId": sid,
                     "toolUseId": "p1", "decision": "allow"}, -32005,
                     validate=True)
        A.call_error("respondPermission", {"sessionId": sid,
                     "toolUseId": "no-such-tool-use", "decision": "allow"},
                     -32602, field="toolUseId", validate=True)
        mark = len(A.msgs)
        self.add(A, sid, "p2", "guarded", {"script": "echo never"})
        A.note(lambda me, p: me == "permission_request" and
               p.get("toolUseId") == "p2", start=mark,
               what="permission_request p2")
        t.expect(A.call("respondPermission", {
            "sessionId": sid, "toolUseId": "p2", "decision": "deny",
            "message": "no thanks"}) == {}, "respondPermission deny result")
        self.add(A, sid, "p3", "sh", {"script": "echo after the deny"})
        self.drain(A, sid, turn, 3)
        self.check_result(A.result_of("p2"), "permission_denied",
                          content="no thanks")
        self.check_result(A.result_of("p3"), "interrupted",
                          content=INTERRUPTED)

        # ---- turn 3: abort interrupt (S8)
        turn = 3
        self.checked.add((sid, turn))
        mark = len(A.msgs)
        self.add(A, sid, "a1", "safe_block",
                 {"script": "sleep 1.5; echo block-done"}, safe=True)
        self.add(A, sid, "a2", "safe_cancel", {"script": "sleep 30"},
                 safe=True)
        self.add(A, sid, "a3", "sh", {"script": "echo never"},
                 status=("queued",))
        s = A.note(lambda me, p: me == "state" and
                   {"a1", "a2"} <= set(p.get("inProgress", [])),
                   start=mark, what="state with a1 and a2 in progress")
        t.expect(s["params"].get("interruptible") is False,
                 "state: a block tool executes, yet interruptible: %s" %
                 json.dumps(s))
        st = A.call("status", {"sessionId": sid})
        if st:
            running = [x for x in st.get("tools", [])
                       if x.get("status") == "executing"]
            t.expect(len(running) == 2 and all("pid" in x for x in running),
                     "status: two executing tools with pids: %s" %
                     json.dumps(st))
        ab = A.call("abort", {"sessionId": sid, "reason": "interrupt"})
        t.expect(ab == {"turn": turn}, "abort: %s" % json.dumps(ab))
        self.drain(A, sid, turn, 3)
        self.check_result(A.result_of("a1"), "ok", content="block-done\n")
        self.check_result(A.result_of("a2"), "interrupted",
                          content=INTERRUPTED)
        self.check_result(A.result_of("a3"), "interrupted",
                          content=INTERRUPTED)

        # ---- turn 4: abort cancel (S9) kills block tools too
        turn = 4
        self.checked.add((sid, turn))
        mark = len(A.msgs)
        self.add(A, sid, "c1", "sh_block", {"script": "sleep 30"})
        A.note(lambda me, p: me == "tool_status" and
               p.get("toolUseId") == "c1" and p.get("status") ==
               "executing", start=mark, what="c1 executing")
        ab = A.call("abort", {"sessionId": sid, "reason": "cancel"})
        t.expect(ab == {"turn": turn}, "abort cancel: %s" % json.dumps(ab))
        self.drain(A, sid, turn, 1)
        self.check_result(A.result_of("c1"), "interrupted",
                          content=INTERRUPTED)

        # ---- turn 5: discard with a drain pending (S11, S12)
        turn = 5
        self.no_results.add((sid, turn))
        mark = len(A.msgs)
        self.add(A, sid, "d1", "sh", {"script": "sleep 30"})
        self.add(A, sid, "d2", "sh", {"script": "echo never"})
        s = A.note(lambda me, p: me == "state" and
                   p.get("inProgress") == ["d1"], start=mark,
                   what="state with d1 in progress")
        t.expect(s["params"].get("interruptible") is True,
                 "state: only a cancel tool executes, so interruptible: %s"
                 % json.dumps(s))
        drain_id = A.send("drain", {"sessionId": sid}, expect_error=True)
        disc = A.call("discard", {"sessionId": sid})
        t.expect(disc == {"discardedTurn": 5, "turn": 6},
                 "discard: %s" % json.dumps(disc))
        m = A.response(drain_id, "drain")
        t.expect(m.get("error", {}).get("code") == -32005,
                 "a drain pending when the turn is discarded: %s" %
                 json.dumps(m))
        A.note(lambda me, p: me == "turn_end" and p.get("turn") == 5 and
               p.get("reason") == "discarded", start=mark,
               what="turn_end discarded")

        # ---- turn 6: every error outcome, truncation, S7
        turn = 6
        self.checked.add((sid, turn))
        self.add(A, sid, "e1", "streamer", {"script":
                 "i=0; while [ $i -lt 40 ]; do echo \"line $i of the "
                 "output\"; i=$((i+1)); done"})
        self.add(A, sid, "e2", "sh", {"script": "echo partial; exit 3"})
        self.add(A, sid, "e3", "sh", {"script": "kill -9 $$"})
        self.add(A, sid, "e4", "slowpoke", {"script": "sleep 30"})
        self.add(A, sid, "e5", "missing", {})
        self.add(A, sid, "e6", "sh", {"script": "sleep 30", "timeout": 200})
        self.add(A, sid, "e7", "failer",
                 {"command": "echo failing; exit 1"})
        self.add(A, sid, "e8", "sh", {"script": "echo never"})
        self.add(A, sid, "e9", "sh", {"script": "echo late"})
        self.drain(A, sid, turn, 9)
        full = "".join("line %d of the output\n" % i for i in range(40))
        p = A.result_of("e1")
        self.check_result(p, "ok")
        c = p["result"]["content"]
        mt = re.search(r"\n\n\[\.\.\. output truncated: (\d+) bytes in "
                       r"total, the whole output is in (.+); the first "
                       r"(\d+) and the last (\d+) bytes are shown "
                       r"\.\.\.\]\n\n", c)
        if t.expect(mt is not None and p["meta"].get("truncated") is True,
                    "e1: not truncated as documented: %r %s" %
                    (c, json.dumps(p["meta"]))):
            t.expect(mt.group(1) == str(len(full)) and
                     mt.group(2) == p["meta"].get("fullOutputPath") and
                     mt.group(3) == "128" and mt.group(4) == "128" and
                     c.startswith(full[:128]) and c.endswith(full[-128:]),
                     "e1: truncated content %r" % c)
            path = p["meta"].get("fullOutputPath")
            try:
                with open(path) as f:
                    t.expect(f.read() == full, "e1: %s does not hold the "
                             "whole output" % path)
            except (OSError, TypeError) as e:
                t.fail("e1: fullOutputPath: %s" % e)
        chunks = [n["params"]["data"] for n in A.notes
                  if n["method"] == "progress" and
                  n["params"].get("toolUseId") == "e1"]
        t.expect(all(isinstance(d, dict) and d.get("stream") == "stdout"
                     for d in chunks) and
                 "".join(d.get("text", "") for d in chunks) == full,
                 "e1: streamed chunks do not add up to the output: %s" %
                 json.dumps(chunks)[:500])
        self.check_result(A.result_of("e2"), "exit",
                          content="partial\nExit code 3")
        self.check_result(A.result_of("e3"), "signal",
                          content="Killed by signal 9 (SIGKILL)")
        self.check_result(A.result_of("e4"), "timeout",
                          content="Error: timed out after 300 ms")
        self.check_result(A.result_of("e5"), "spawn_failed", prefix=(
            "<tool_use_error>Error: cannot run "
            "/nonexistent/stexec-test-prog: "))
        self.check_result(A.result_of("e6"), "timeout",
                          content="Error: timed out after 200 ms")
        self.check_result(A.result_of("e7"), "exit",
                          content="failing\nExit code 1")
        sib = ("<tool_use_error>Cancelled: parallel tool call "
               "failer(echo failing; exit 1) errored</tool_use_error>")
        self.check_result(A.result_of("e8"), "sibling_error", content=sib)
        self.check_result(A.result_of("e9"), "sibling_error", content=sib)
        p = A.result_of("e2")
        t.expect(p["meta"].get("exitCode") == 3, "e2: exitCode")
        p = A.result_of("e3")
        t.expect(p["meta"].get("signal") == 9, "e3: signal")

        # ---- turn 7: a concurrencySafe rule
        turn = 7
        self.checked.add((sid, turn))
        self.add(A, sid, "x1", "rule_safe", {"script": "echo rule"},
                 safe=True)
        self.add(A, sid, "x2", "rule_safe", {"script": "printf 'x\\n'"},
                 safe=False)
        self.drain(A, sid, turn, 2)
        self.check_result(A.result_of("x1"), "ok", content="rule\n")
        self.check_result(A.result_of("x2"), "ok", content="x\n")

        # ---- an empty turn drains at once
        turn = 8
        self.drain(A, sid, turn, 0)
        A.note(lambda me, p: me == "turn_end" and p.get("turn") == 8,
               what="turn_end of the empty turn 8")

        # ---- events: pull, with since and max; maybe a replay gap
        seen = {n["params"]["seq"]: n for n in A.notes
                if n["params"].get("sessionId") == sid}
        last = max(seen)
        rid = A.send("events", {"sessionId": sid, "since": 0, "max": 5})
        m = A.response(rid, "events")
        if "error" in m:
            err = m["error"]
            t.expect(err.get("code") == -32004 and "oldestSeq" in
                     (err.get("data") or {}), "events since 0: %s" %
                     json.dumps(err))
            oldest = (err.get("data") or {}).get("oldestSeq", last)
            since = max(oldest - 1, 0)
            print("events since 0: replay gap, oldest retained seq %d" %
                  oldest)
        else:
            since = 0
            self.check_events(m["result"], seen, 0, 5)
        ev = A.call("events", {"sessionId": sid, "since": since, "max": 3})
        if ev:
            self.check_events(ev, seen, since, 3)
        ev = A.call("events", {"sessionId": sid, "since": last})
        t.expect(ev == {"notifications": [], "lastSeq": last},
                 "events since the last seq: %s" % json.dumps(ev))
        # Without since: from the oldest notification retained, no gap.
        ev = A.call("events", {"sessionId": sid})
        if ev:
            self.check_events(ev, seen, since, 1000)

        # ---- a second subscriber resumes with since; A unsubscribes
        B = Conn(t, "B")
        since = max(last - 6, 0)
        rid = B.send("subscribe", {"sessionId": sid, "since": since})
        m = B.response(rid, "subscribe")
        if "error" in m:
            t.expect(m["error"].get("code") == -32004, "subscribe since %d:"
                     " %s" % (since, json.dumps(m["error"])))
            since = m["error"].get("data", {}).get("oldestSeq", 1) - 1
            B.seq[sid] = since + 1
            sub = B.call("subscribe", {"sessionId": sid, "since": since})
        else:
            sub = m["result"]
            B.seq[sid] = since + 1
        t.expect(sub == {"lastSeq": last}, "subscribe: %s, want lastSeq %d"
                 % (json.dumps(sub), last))
        for seq in range(since + 1, last + 1):
            n = B.note(lambda me, p, seq=seq: p.get("seq") == seq and
                       p.get("sessionId") == sid, what="replay of seq %d"
                       % seq)
            t.expect(n == seen[seq], "replayed seq %d differs from the "
                     "pushed one: %s vs %s" % (seq, json.dumps(n),
                                               json.dumps(seen[seq])))
        t.expect(A.call("unsubscribe", {"sessionId": sid}) == {},
                 "unsubscribe result")
        del A.seq[sid]
        after = len(A.notes)
        mark = len(B.msgs)
        self.add(A, sid, "z1", "sh", {"script": "echo z"})
        self.drain(A, sid, 9, 1)
        t.expect(len(A.notes) == after, "notifications after unsubscribe: %s"
                 % json.dumps(A.notes[after:])[:500])
        self.check_result(B.result_of("z1", mark), "ok", content="z\n")
        B.note(lambda me, p: me == "turn_end" and p.get("turn") == 9,
               start=mark, what="turn_end of turn 9 on B")

        ls = A.call("listSessions") or {"sessions": []}
        mine = [s for s in ls["sessions"] if s.get("sessionId") == sid]
        t.expect(mine == [{"sessionId": sid, "turn": 10, "unfinished": 0}],
                 "listSessions: %s" % json.dumps(ls))
        st = A.call("stats")
        if st:
            t.expect(st.get("pid") == t.proc.pid, "stats.pid %r, want %d" %
                     (st.get("pid"), t.proc.pid))
            t.expect(st.get("sessions", 0) >= 1 and
                     st.get("connections", 0) >= 3, "stats: %s" %
                     json.dumps(st))

        # ---- closeSession kills what runs; B gets session_closed
        mark = len(B.msgs)
        self.add(A, sid, "k1", "sh_block", {"script": "sleep 30"})
        B.note(lambda me, p: me == "tool_status" and
               p.get("toolUseId") == "k1" and p.get("status") == "executing",
               start=mark, what="k1 executing on B")
        # metrics (extension): the running tool, the caller's session
        mt = A.call("metrics")
        if mt:
            fam = {f["name"]: f for f in mt["metrics"]}
            run = fam.get("stexec_session_tools_running", {})
            t.expect({"labels": {"session": sid}, "value": 1} in
                     run.get("samples", []), "metrics: %s" %
                     json.dumps(run))
            fin = fam.get("stexec_tools_finished_total", {})
            t.expect(any(x["labels"] == {"reason": "ok"} and
                         x["value"] >= 1 for x in fin.get("samples", [])),
                     "metrics: %s" % json.dumps(fin))
        st = A.call("status", {"sessionId": sid})
        k1 = [x for x in (st or {}).get("tools", []) if x["id"] == "k1"]
        t.expect(k1 != [] and k1[0].get("elapsedMs", -1) >= 0,
                 "status of a running tool: %s" % json.dumps(st))
        drain_id = A.send("drain", {"sessionId": sid}, expect_error=True)
        t.expect(A.call("closeSession", {"sessionId": sid}) == {},
                 "closeSession result")
        m = A.response(drain_id, "drain")
        t.expect(m.get("error", {}).get("code") == -32005,
                 "a drain pending at closeSession: %s" % json.dumps(m))
        B.note(lambda me, p: me == "session_closed" and
               p.get("sessionId") == sid, start=mark, what="session_closed")
        A.call_error("addTool", {"sessionId": sid, "toolUse": {
            "id": "k2", "name": "sh", "input": {"script": "true"}}}, -32001,
            validate=True)
        ls = A.call("listSessions") or {"sessions": []}
        t.expect(all(s.get("sessionId") != sid for s in ls["sessions"]),
                 "listSessions lists a closed session: %s" % json.dumps(ls))
        st = A.call("stats")
        if st:
            t.expect(st.get("toolsRunning") == 0, "stats after closeSession"
                     ": %s" % json.dumps(st))

        self.check_order(A)
        self.drain_under_pressure()
        self.jobs()
        self.client_tools()
        self.network()

    def drain_under_pressure(self):
        """S12 on a connection with a lot queued: the drain answer must
        still come after the turn's tool_result and turn_end."""
        t = self.t
        D = Conn(t, "D")
        big = {"name": "big", "command": ["/bin/sh", "-c",
               "head -c 1500000 /dev/zero | tr '\\0' a"],
               "maxResultBytes": 3000000}
        cs = D.call("createSession", {"tools": [big]})
        if cs is None:
            return
        sid = cs["sessionId"]
        D.call("subscribe", {"sessionId": sid, "since": 0})
        D.seq[sid] = 1
        # A second client sees the turn end while D does not read.
        W = Conn(t, "W")
        W.call("subscribe", {"sessionId": sid, "since": 0})
        self.add(D, sid, "big1", "big", {})
        rid = D.send("drain", {"sessionId": sid})
        W.note(lambda me, p: me == "turn_end" and p.get("sessionId") == sid,
               what="turn_end on the watcher")
        W.close()
        D.response(rid, "drain")
        methods = [m.get("method") for m in D.msgs]
        i = next(i for i, m in enumerate(D.msgs) if m.get("id") == rid)
        t.expect("turn_end" in methods[:i] and "tool_result" in methods[:i],
                 "S12: with 1.5 MB queued for the client, the drain answer "
                 "came before the turn's notifications: %s" %
                 [m.get("method") or "response %s" % m.get("id")
                  for m in D.msgs])
        # The result held the whole output: no file (extension).
        of = D.call("outputFiles", {"sessionId": sid})
        t.expect(of == {"files": []}, "outputFiles: %r" % (of,))
        D.call("closeSession", {"sessionId": sid})

    def client_tools(self):
        """(extension) Client-run tools: serveTools, tool_start,
        toolProgress, completeTool with content blocks, tool_cancel, the
        errors; read_file of a PNG gives an image block."""
        t = self.t
        S = Conn(t, "S")      # serves the client-run tools
        X = Conn(t, "X")      # a second claimant
        W = Conn(t, "W")      # adds the tools and watches
        todo = {"name": "TodoWrite", "runner": "client",
                "inputSchema": {"type": "object"}}
        task = {"name": "Task", "runner": "client", "concurrencySafe": True,
                "interruptBehavior": "cancel"}
        work = os.path.join(t.tmp, "work")
        cs = W.call("createSession", {"tools": [todo, task], "cwd": work})
        if cs is None:
            return
        sid = cs["sessionId"]
        lt = W.call("listTools", {"sessionId": sid})
        for d in (lt or {}).get("tools", []):
            if d.get("name") in ("TodoWrite", "Task"):
                t.expect(d.get("runner") == "client" and
                         "command" not in d, "listTools of a client tool: "
                         "%s" % json.dumps(d))
        W.call("subscribe", {"sessionId": sid, "since": 0})
        W.seq[sid] = 1
        t.expect(S.call("serveTools", {"sessionId": sid, "names": [
            "TodoWrite", "Task"]}) == {"names": ["TodoWrite", "Task"]},
            "serveTools result")
        X.call_error("serveTools", {"sessionId": sid, "names": ["Task"]},
                     -32005, validate=True)
        X.call_error("serveTools", {"sessionId": sid, "names": ["bash"]},
                     -32602, field="names[0]", validate=True)
        X.call("serveTools", {"sessionId": sid, "names": ["Task"],
                              "takeOver": True})
        S.call("serveTools", {"sessionId": sid, "names": ["Task"],
                              "takeOver": True})

        def started(conn, tid, start=0):
            return conn.note(lambda me, p: me == "tool_start" and
                             p.get("toolUseId") == tid, start=start,
                             what="tool_start of " + tid)["params"]
        self.add(W, sid, "ct1", "TodoWrite", {"todos": [1]})
        p = started(S, "ct1")
        t.expect(p.get("name") == "TodoWrite" and
                 p.get("input") == {"todos": [1]} and "seq" not in p,
                 "tool_start: %s" % json.dumps(p))
        t.expect(S.call("toolProgress", {"sessionId": sid, "toolUseId":
                                         "ct1", "progress": {"n": 1}})
                 == {}, "toolProgress result")
        W.note(lambda me, p: me == "progress" and
               p.get("toolUseId") == "ct1" and p.get("data") == {"n": 1},
               what="the client tool's progress on the watcher")
        S.call_error("completeTool", {"sessionId": sid, "toolUseId": "ct1",
                                      "content": [{"type": "sound"}]},
                     -32602)
        X.call_error("completeTool", {"sessionId": sid, "toolUseId": "ct1",
                                      "content": "from X"}, -32005,
                     validate=True)
        png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00"
               b"\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00"
               b"\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff"
               b"\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")
        blocks = [{"type": "text", "text": "a dot:"},
                  {"type": "image", "source": {
                      "type": "base64", "media_type": "image/png",
                      "data": base64.b64encode(png).decode()}}]
        t.expect(S.call("completeTool", {"sessionId": sid, "toolUseId":
                                         "ct1", "content": blocks}) == {},
                 "completeTool result")
        r = W.result_of("ct1")
        t.expect(r.get("result", {}).get("content") == blocks and
                 r["result"].get("is_error") is False,
                 "the blocks arrive whole: %s" % json.dumps(r)[:300])
        S.call_error("completeTool", {"sessionId": sid, "toolUseId": "ct1",
                                      "content": "again"}, -32005,
                     validate=True)

        mark = len(S.msgs)
        self.add(W, sid, "ct2", "Task", {})
        started(S, "ct2", mark)
        W.call("abort", {"sessionId": sid, "reason": "interrupt"})
        c = S.note(lambda me, p: me == "tool_cancel" and
                   p.get("toolUseId") == "ct2", start=mark,
                   what="tool_cancel of ct2")["params"]
        t.expect(c.get("reason") == "interrupt", "tool_cancel reason %r, "
                 "want 'interrupt'" % c.get("reason"))
        self.check_result(W.result_of("ct2"), "interrupted")
        S.call_error("completeTool", {"sessionId": sid, "toolUseId": "ct2",
                                      "content": "late", "isError": True},
                     -32005, validate=True)
        with open(os.path.join(work, "dot.png"), "wb") as f:
            f.write(png)
        self.drain(W, sid, 1, 2)
        self.add(W, sid, "ct3", "read_file", {"file_path": "dot.png"})
        self.add(W, sid, "ct4", "TodoWrite", {})
        started(S, "ct4")
        S.call("completeTool", {"sessionId": sid, "toolUseId": "ct4",
                                "content": "refused", "isError": True})
        r = W.result_of("ct3")
        t.expect(r.get("result", {}).get("content") == blocks[1:],
                 "read_file of a PNG: %s" % json.dumps(r)[:300])
        self.check_result(W.result_of("ct4"), "error", content="refused")
        W.call("closeSession", {"sessionId": sid})
        for conn in (S, X, W):
            conn.close()

    def jobs(self):
        """Jobs (PROTOCOL.md §4, Jobs): every job method, its errors, the
        internal built-ins, writeStdin, and job_output and job_exit, on a
        session of its own subscribed from seq 0."""
        t = self.t
        J = Conn(t, "J")
        tools = [
            # A job's stdin gets the input ({}) first and stays open.
            {"name": "bg", "command": ["/bin/sh", "-c",
             "echo hi; head -c 2 >/dev/null; cat"], "background": True},
            {"name": "sleeper", "command": ["/bin/sh", "-c",
             "exec sleep 30"], "background": True},
            {"name": "term", "command": ["cat"], "tty": True,
             "background": True, "ttySize": {"cols": 100, "rows": 30}},
            sh_tool("maybe_bg", backgroundFromInput="bg",
                    yieldFromInput="yield", yieldMs=0, stdin="input",
                    ttyFromInput="tty", inputSchema={"type": "object"}),
            {"name": "die", "command": ["/bin/sh", "-c",
             "sleep 0.3; kill -9 $$"], "background": True},
            {"name": "two", "command": ["head", "-n", "2"],
             "stdin": "stream", "timeoutMs": 10000},
            {"name": "peek", "description": "job_output under another name",
             "internal": "job_output", "inputSchema": {"type": "object"},
             "concurrencySafe": True},
        ]
        for d in tools:
            t.validate("tooldef", d, "session tool %s (test bug)" % d["name"])
        # A ToolDef with internal has no command (PROTOCOL.md §4, Jobs).
        bad = {"name": "x", "internal": "job_kill", "command": ["/bin/true"]}
        t.expect(t.schemas.errors("tooldef", bad) != [],
                 "tooldef.schema.json accepts internal with a command")
        t.expect(t.schemas.errors("tooldef", {"name": "x"}) != [],
                 "tooldef.schema.json accepts a ToolDef without command "
                 "or internal")
        J.call_error("createSession", {"tools": [bad]}, -32602,
                     field="tools[0]")
        cs = J.call("createSession", {"tools": tools})
        if cs is None:
            return
        sid = cs["sessionId"]
        lt = J.call("listTools", {"sessionId": sid}) or {"tools": []}
        by_name = {d.get("name"): d for d in lt["tools"]}
        want = {"bg": ("background", True), "term": ("ttySize",
                {"cols": 100, "rows": 30}), "two": ("stdin", "stream"),
                "peek": ("internal", "job_output"),
                "bash_output": ("internal", "job_output"),
                "kill_shell": ("internal", "job_kill"),
                "bash": ("backgroundFromInput", "run_in_background"),
                "maybe_bg": ("yieldFromInput", "yield")}
        for name, (k, v) in want.items():
            d = by_name.get(name, {})
            t.expect(d.get(k) == v, "listTools: %s.%s %r, want %r" %
                     (name, k, d.get(k), v))
        for name in ("peek", "bash_output", "kill_shell"):
            t.expect("command" not in by_name.get(name, {"command": 0}),
                     "listTools: %s has a command" % name)
        t.expect(J.call("subscribe", {"sessionId": sid, "since": 0}) ==
                 {"lastSeq": 0}, "subscribe on the job session")
        J.seq[sid] = 1

        def job_exit(jid, start=0):
            return J.note(lambda me, p: me == "job_exit" and
                          p.get("jobId") == jid, start=start,
                          what="job_exit of " + jid)["params"]

        def output_of(jid):
            return "".join(n["params"]["text"] for n in J.notes
                           if n["method"] == "job_output" and
                           n["params"].get("jobId") == jid)

        # ---- three jobs: a pipe, a sleeper, a terminal
        mark = len(J.msgs)
        for tid, name in (("g1", "bg"), ("q1", "sleeper"), ("y1", "term")):
            self.add(J, sid, tid, name, {})
        self.drain(J, sid, 1, 3)
        for i, tid in enumerate(("g1", "q1", "y1")):
            p = J.result_of(tid, mark)
            self.check_result(p, "background",
                              prefix="Started job j-%d (pid " % (i + 1))
            t.expect(p["meta"].get("job", {}).get("jobId") == "j-%d" %
                     (i + 1), "%s: meta.job %r" % (tid, p["meta"].get("job")))
        lj = J.call("listJobs", {"sessionId": sid}) or {"jobs": []}
        t.expect([(j.get("jobId"), j.get("toolUseId"), j.get("status"),
                   j.get("tty")) for j in lj["jobs"]] ==
                 [("j-1", "g1", "running", False),
                  ("j-2", "q1", "running", False),
                  ("j-3", "y1", "running", True)],
                 "listJobs: %s" % json.dumps(lj))

        # readJob: since, waitMs, filter, maxBytes, the session's cursor
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1", "since": 0,
                               "waitMs": 5000, "maxBytes": 1000})
        t.expect(r is not None and r.get("text") == "hi\n" and
                 r.get("offset") == 0 and r.get("next") == 3 and
                 r.get("dropped") is False and r.get("status") == "running",
                 "readJob since 0: %s" % json.dumps(r))
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1",
                               "since": 0, "filter": "^x"})
        t.expect(r is not None and r.get("text") == "" and
                 r.get("next") == 3, "readJob filter ^x: %s" %
                 json.dumps(r))
        # Without since: from where the result (or the last such read)
        # stopped; a second read has nothing new.
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1",
                               "waitMs": 0, "since": None, "filter": None,
                               "maxBytes": None})
        t.expect(r is not None and "hi\n".endswith(r.get("text", "-")) and
                 r.get("next") == 3, "readJob without since: %s" %
                 json.dumps(r))
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1"})
        t.expect(r is not None and r.get("text") == "" and
                 r.get("offset") == 3, "readJob without since, again: %s" %
                 json.dumps(r))
        # writeJob, then eof: cat ends, and job_exit says ok.
        t.expect(J.call("writeJob", {"sessionId": sid, "jobId": "j-1",
                                     "data": "there\n"}) == {"written": 6},
                 "writeJob result")
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1",
                               "since": 3, "waitMs": 5000})
        t.expect(r is not None and r.get("text") == "there\n",
                 "readJob waitMs brings what cat echoed: %s" %
                 json.dumps(r))
        t.expect(J.call("writeJob", {"sessionId": sid, "jobId": "j-1",
                                     "data": "", "eof": True}) ==
                 {"written": 0}, "writeJob eof result")
        p = job_exit("j-1")
        t.expect((p.get("exitCode"), p.get("signal"), p.get("reason")) ==
                 (0, None, "ok"), "job_exit j-1: %s" % json.dumps(p))
        # What the result showed is not sent again: job_output carries
        # the rest, each from its offset.
        outs = [n["params"] for n in J.notes if n["method"] == "job_output"
                and n["params"].get("jobId") == "j-1"]
        at = outs[0].get("offset") if outs else None
        for o in outs:
            t.expect(o.get("offset") == at, "job_output of j-1 at offset %r,"
                     " want %r" % (o.get("offset"), at))
            at = (at or 0) + len(o.get("text", "").encode())
        t.expect(outs != [] and outs[0].get("offset") in (0, 3) and
                 output_of("j-1") == "hi\nthere\n"[outs[0]["offset"]:],
                 "job_output of j-1: %s" % json.dumps(outs))
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-1", "since": 0})
        t.expect(r is not None and r.get("text") == "hi\nthere\n" and
                 r.get("status") == "exited" and r.get("exitCode") == 0,
                 "readJob of an ended job: %s" % json.dumps(r))
        J.call_error("writeJob", {"sessionId": sid, "jobId": "j-1",
                                  "data": "x"}, -32005, validate=True)

        # resizeJob: a terminal, then a job without one
        t.expect(J.call("resizeJob", {"sessionId": sid, "jobId": "j-3",
                                      "cols": 120, "rows": 40}) == {},
                 "resizeJob result")
        J.call_error("resizeJob", {"sessionId": sid, "jobId": "j-2",
                                   "cols": 80, "rows": 24}, -32005,
                     validate=True)
        J.call("writeJob", {"sessionId": sid, "jobId": "j-3",
                            "data": "typed\n"})
        r = J.call("readJob", {"sessionId": sid, "jobId": "j-3",
                               "waitMs": 5000})
        t.expect(r is not None and "typed" in r.get("text", ""),
                 "the terminal echoes: %s" % json.dumps(r))

        # signalJob: terminate the sleeper, kill the terminal
        mark = len(J.msgs)
        t.expect(J.call("signalJob", {"sessionId": sid, "jobId": "j-2",
                                      "signal": "terminate"}) == {},
                 "signalJob result")
        p = job_exit("j-2", mark)
        t.expect(p.get("reason") == "killed" and p.get("exitCode") is None,
                 "job_exit j-2 after terminate: %s" % json.dumps(p))
        J.call_error("signalJob", {"sessionId": sid, "jobId": "j-2",
                                   "signal": "kill"}, -32005, validate=True)
        J.call("signalJob", {"sessionId": sid, "jobId": "j-3",
                             "signal": "kill"})
        p = job_exit("j-3", mark)
        t.expect(p.get("reason") == "killed", "job_exit j-3 after kill: %s"
                 % json.dumps(p))
        lj = J.call("listJobs", {"sessionId": sid}) or {"jobs": []}
        t.expect([(j.get("status"), j.get("pid")) for j in lj["jobs"]] ==
                 [("exited", None), ("killed", None), ("killed", None)],
                 "listJobs once they ended: %s" % json.dumps(lj))

        # The errors: -32602 naming the field, -32001
        for params, field in (
                ({"jobId": "j-99"}, "jobId"),
                ({"jobId": "j-1", "maxBytes": 0}, "maxBytes"),
                ({"jobId": "j-1", "maxBytes": 4194305}, "maxBytes"),
                ({"jobId": "j-1", "waitMs": 60001}, "waitMs"),
                ({"jobId": "j-1", "since": -1}, "since"),
                ({"jobId": "j-1", "filter": "(a*)*"}, "filter"),
                ({}, "jobId")):
            params = dict(params, sessionId=sid)
            J.call_error("readJob", params, -32602, field=field,
                         validate=params.get("jobId") == "j-99")
        J.call_error("writeJob", {"sessionId": sid, "jobId": "j-99",
                                  "data": "x"}, -32602, field="jobId",
                     validate=True)
        J.call_error("writeJob", {"sessionId": sid, "jobId": "j-1"}, -32602,
                     field="data")
        J.call_error("signalJob", {"sessionId": sid, "jobId": "j-1",
                                   "signal": "hup"}, -32602, field="signal")
        J.call_error("signalJob", {"sessionId": sid, "jobId": "j-99",
                                   "signal": "kill"}, -32602, field="jobId",
                     validate=True)
        J.call_error("resizeJob", {"sessionId": sid, "jobId": "j-3",
                                   "cols": 0, "rows": 24}, -32602,
                     field="cols")
        J.call_error("resizeJob", {"sessionId": sid, "jobId": "j-3",
                                   "cols": 80, "rows": 1001}, -32602,
                     field="rows")
        J.call_error("resizeJob", {"sessionId": sid, "jobId": "j-99",
                                   "cols": 80, "rows": 24}, -32602,
                     field="jobId", validate=True)
        J.call_error("listJobs", {"sessionId": "s-does-not-exist"}, -32001,
                     validate=True)
        J.call_error("writeStdin", {"sessionId": sid, "toolUseId": "nope",
                                    "data": "x"}, -32602, field="toolUseId",
                     validate=True)

        # ---- turn 2: jobs from the input, and the internal built-ins
        mark = len(J.msgs)
        self.add(J, sid, "m1", "maybe_bg", {"script": "echo early; sleep 30",
                                            "bg": True, "yield": 300})
        self.add(J, sid, "m2", "maybe_bg", {"script": "echo quick",
                                            "bg": True, "yield": 5000})
        self.add(J, sid, "h1", "bash", {"command": "echo from-bash; sleep 30",
                                        "run_in_background": True})
        self.add(J, sid, "o1", "bash_output", {"bash_id": "j-5"})
        self.add(J, sid, "o2", "peek", {"jobId": "j-4"})
        self.add(J, sid, "o3", "bash_output", {"bash_id": "j-99"})
        self.add(J, sid, "k1", "kill_shell", {"shell_id": "j-5"})
        self.add(J, sid, "k2", "kill_shell", {"shell_id": "j-1"})
        self.drain(J, sid, 2, 8)
        p = J.result_of("m1", mark)
        self.check_result(p, "background", prefix="Started job j-4 (pid ")
        t.expect("early" in p["result"]["content"], "m1: the output so far:"
                 " %r" % p["result"]["content"])
        self.check_result(J.result_of("m2", mark), "ok", content="quick\n")
        self.check_result(J.result_of("h1", mark), "background",
                          prefix="Started job j-5 (pid ")
        p = J.result_of("o1", mark)
        t.expect(p["result"]["is_error"] is False and
                 "[job j-5: running]" in p["result"]["content"],
                 "bash_output: %s" % json.dumps(p))
        p = J.result_of("o2", mark)
        t.expect(p["result"]["is_error"] is False and
                 "[job j-4: running]" in p["result"]["content"],
                 "peek (internal job_output): %s" % json.dumps(p))
        p = J.result_of("o3", mark)
        t.expect(p["result"]["is_error"] is True and
                 "no job j-99" in p["result"]["content"],
                 "bash_output of no such job: %s" % json.dumps(p))
        p = J.result_of("k1", mark)
        t.expect(p["result"]["is_error"] is False,
                 "kill_shell: %s" % json.dumps(p))
        job_exit("j-5", mark)
        p = J.result_of("k2", mark)
        t.expect(p["result"]["is_error"] is True,
                 "kill_shell of an ended job: %s" % json.dumps(p))

        # ---- turn 3: writeStdin for a foreground tool (stdin: stream)
        mark = len(J.msgs)
        self.add(J, sid, "w1", "two", {})
        t.expect(J.call("writeStdin", {"sessionId": sid, "toolUseId": "w1",
                                       "data": "\nsecond\n"}) ==
                 {"written": 8}, "writeStdin result")
        self.add(J, sid, "w2", "two", {})
        # w2 is not concurrency-safe: it waits for w1 to end, and a queued
        # tool has no stdin yet; write once it runs, whenever that is.
        J.note(lambda me, p: me == "tool_status" and
               p.get("toolUseId") == "w2" and p.get("status") == "executing",
               start=mark, what="w2 executing")
        J.call("writeStdin", {"sessionId": sid, "toolUseId": "w2",
                              "data": "\n", "eof": True})
        J.call_error("writeStdin", {"sessionId": sid, "toolUseId": "w2",
                                    "data": "x"}, -32005, validate=True)
        J.call_error("writeStdin", {"sessionId": sid, "toolUseId": "w2",
                                    "data": 1}, -32602, field="data")
        self.add(J, sid, "d1", "die", {})
        self.drain(J, sid, 3, 3)
        self.check_result(J.result_of("w1", mark), "ok",
                          content="{}\nsecond\n")
        self.check_result(J.result_of("w2", mark), "ok", content="{}\n")
        self.check_result(J.result_of("d1", mark), "background",
                          prefix="Started job j-6 (pid ")
        p = job_exit("j-6", mark)
        t.expect((p.get("exitCode"), p.get("signal"), p.get("reason")) ==
                 (None, 9, "signal"), "job_exit of a job that died of "
                 "SIGKILL: %s" % json.dumps(p))
        J.call_error("writeStdin", {"sessionId": sid, "toolUseId": "w1",
                                    "data": "x"}, -32602, field="toolUseId",
                     validate=True)

        # job_output and job_exit are in the log: events replays them.
        rid = J.send("events", {"sessionId": sid, "since": 0, "max": 10000})
        m = J.response(rid, "events")
        ev = m.get("result")
        if "error" in m:
            oldest = (m["error"].get("data") or {}).get("oldestSeq", 1)
            t.expect(m["error"].get("code") == -32004, "events since 0: %s"
                     % json.dumps(m["error"]))
            ev = J.call("events", {"sessionId": sid, "since": oldest - 1,
                                   "max": 10000})
        if ev:
            first = min([n["params"]["seq"] for n in
                         ev.get("notifications", [])] or [0])
            got = [n for n in ev.get("notifications", [])
                   if n["method"] in ("job_output", "job_exit")]
            pushed = [n for n in J.notes
                      if n["method"] in ("job_output", "job_exit") and
                      first <= n["params"].get("seq", 0) <=
                      ev.get("lastSeq", 0)]
            t.expect(got == pushed, "events: the job "
                     "notifications differ from the pushed ones: %s vs %s"
                     % (json.dumps(got)[:300], json.dumps(pushed)[:300]))
        # closeSession kills j-4, which still runs.
        mark = len(J.msgs)
        t.expect(J.call("closeSession", {"sessionId": sid}) == {},
                 "closeSession with a job running")
        J.note(lambda me, p: me == "session_closed" and
               p.get("sessionId") == sid, start=mark,
               what="session_closed of the job session")
        J.call_error("readJob", {"sessionId": sid, "jobId": "j-4"}, -32001,
                     validate=True)

    def check_events(self, ev, seen, since, mx):
        t = self.t
        ns = ev.get("notifications", [])
        seqs = [n.get("params", {}).get("seq") for n in ns]
        t.expect(0 < len(ns) <= mx and
                 seqs == list(range(since + 1, since + 1 + len(ns))) and
                 ev.get("lastSeq") == seqs[-1] if ns else False,
                 "events since %d max %d: seqs %s lastSeq %r" %
                 (since, mx, seqs, ev.get("lastSeq")))
        for n in ns:
            seq = n.get("params", {}).get("seq")
            t.expect(n == seen.get(seq), "events: seq %r differs from the "
                     "pushed one: %s vs %s" % (seq, json.dumps(n),
                                               json.dumps(seen.get(seq))))

    def errors(self, E, sid, max_message):
        """Bad input on connection E; the connection stays usable."""
        t = self.t
        mark = len(E.msgs)
        E.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
        m = E.wait(lambda m: "error" in m, start=mark, what="a parse error")
        t.expect(m.get("id") is None and
                 m["error"].get("code") == -32700, "parse error: %s" %
                 json.dumps(m))
        mark = len(E.msgs)
        E.send_raw(b"\n\r\n")  # blank lines: no reply
        E.send_raw(b"[]\n")
        m = E.wait(lambda m: "error" in m, start=mark, what="batch error")
        t.expect(m.get("id") is None and
                 m["error"].get("code") == -32600, "an empty batch: %s" %
                 json.dumps(m))
        t.methods["x0"] = None
        mark = len(E.msgs)
        E.send_raw(b'{"jsonrpc":"2.0","id":"x0","method":"ping",'
                   b'"params":null}\n')
        m = E.wait(lambda m: "error" in m, start=mark, what="params null")
        t.expect(m.get("id") == "x0" and m["error"].get("code") == -32600,
                 "params null: %s" % json.dumps(m))
        t.methods["x1"] = None
        mark = len(E.msgs)
        E.send_raw(b'{"jsonrpc":"1.0","id":"x1","method":"ping"}\n')
        m = E.wait(lambda m: "error" in m, start=mark, what="bad version")
        t.expect(m.get("id") == "x1" and m["error"].get("code") == -32600,
                 "jsonrpc 1.0: %s" % json.dumps(m))
        t.expect(E.call("ping") == {}, "ping after bad input")
        err = E.call_error("frobnicate", {}, -32601)
        if err:
            t.expect(err.get("message") == "Method not found: frobnicate",
                     "unknown method message: %r" % err.get("message"))
        E.call_error("createSession", {"maxParallel": 0}, -32602,
                     field="maxParallel")
        E.call_error("createSession", {"maxParallel": 257}, -32602,
                     field="maxParallel")
        E.call_error("createSession", {"maxParallel": "ten"}, -32602,
                     field="maxParallel")
        E.call_error("createSession", {"tools": [{"name": "x"}]}, -32602,
                     field="tools[0]")
        E.call_error("createSession", {"tools": [
            {"name": "x", "command": ["/bin/true"]},
            {"name": "x", "command": ["/bin/false"]}]}, -32602,
            field="tools[1]")
        E.call_error("createSession", {"cwd": "relative/dir"}, -32602,
                     field="cwd")
        E.call_error("createSession", {"cwd": os.path.join(
            t.tmp, "no-such-dir")}, -32602, field="cwd")
        E.call_error("createSession", {"env": {"X": 1}}, -32602,
                     field="env.X")
        E.call_error("ping", [], -32602, field="params")
        E.call_error("addTool", {"sessionId": sid, "toolUse": {
            "name": "bash", "input": {}}}, -32602, field="toolUse*")
        E.call_error("addTool", {"sessionId": sid}, -32602, field="toolUse")
        E.call_error("abort", {"sessionId": sid, "reason": "stop"}, -32602,
                     field="reason")
        E.call_error("subscribe", {"sessionId": sid, "since": -1}, -32602,
                     field="since")
        E.call_error("events", {"sessionId": sid, "max": 0}, -32602,
                     field="max")
        E.call_error("respondPermission", {"sessionId": sid, "toolUseId":
                     "p", "decision": "maybe"}, -32602, field="decision")
        E.call_error("status", {}, -32602, field="sessionId")
        err = E.call_error("addTool", {"sessionId": "s-does-not-exist",
                           "toolUse": {"id": "t", "name": "bash",
                                       "input": {}}}, -32001, validate=True)
        if err:
            t.expect(err.get("message") ==
                     "Unknown session: s-does-not-exist",
                     "unknown session message: %r" % err.get("message"))
        E.call_error("closeSession", {"sessionId": "s-does-not-exist"},
                     -32001, validate=True)
        E.call_error("drain", {"sessionId": "s-does-not-exist"}, -32001,
                     validate=True)
        t.expect(E.call("ping") == {}, "ping after bad params")
        st = E.call("status", {"sessionId": sid})
        t.expect(st == {"turn": 1, "interruptible": False, "tools": []},
                 "the bad requests changed the session: %s" % json.dumps(st))

        # An over-long line: -32600 with id null, then the connection closes.
        L = Conn(t, "L")
        pad = max_message + 1
        data = (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' +
                b"x" * pad + b'"}}\n')

        def writer():
            try:
                L.sock.sendall(data)
            except OSError:
                pass
        th = threading.Thread(target=writer, daemon=True)
        th.start()
        m = L.wait(lambda m: "error" in m, what="the over-long line error")
        want = "Invalid Request: message longer than %d bytes" % max_message
        t.expect(m.get("id") is None and m["error"].get("code") == -32600 and
                 m["error"].get("message") == want,
                 "over-long line: %s, want -32600 %r" % (json.dumps(m), want))
        deadline = time.monotonic() + WAIT
        try:
            while not L.eof:
                L.read_one(deadline)
        except Timeout:
            t.fail("the connection stays open after an over-long line")
        th.join(5)

    def check_order(self, A):
        """S5, S6, S10, S11 as conn A saw them."""
        t = self.t
        by_tool = {}
        results = {}
        turn_end = {}
        for i, n in enumerate(A.notes):
            p = n["params"]
            key = (p.get("sessionId"), p.get("turn"))
            if n["method"] == "turn_end":
                turn_end[key] = i
            if "toolUseId" not in p:
                continue
            by_tool.setdefault((key, p["toolUseId"]), []).append((i, n))
            if n["method"] == "tool_result":
                results.setdefault(key, []).append(p["toolUseId"])
                t.expect(p["result"].get("tool_use_id") == p["toolUseId"],
                         "tool_result: tool_use_id %r != toolUseId %r" %
                         (p["result"].get("tool_use_id"), p["toolUseId"]))
                t.expect(key not in turn_end, "tool_result of %s after "
                         "turn_end" % p["toolUseId"])
        for key in self.checked:
            t.expect(results.get(key) == self.adds.get(key),
                     "turn %s: results in order %s, added in order %s" %
                     (key[1], results.get(key), self.adds.get(key)))
        for key in self.no_results:
            got = [n["method"] for (k, _), lst in by_tool.items() if k == key
                   for _, n in lst if n["method"] in ("tool_result",
                                                      "progress")]
            t.expect(not got, "discarded turn %s delivered %s" %
                     (key[1], got))
        for (key, tid), lst in by_tool.items():
            methods = [n["method"] if n["method"] != "tool_status" else
                       "tool_status:" + n["params"].get("status", "?")
                       for _, n in lst]
            if key not in self.checked:
                continue
            ok = re.fullmatch(
                r"(permission_request )?(tool_status:executing )?"
                r"(progress )*tool_status:completed tool_result",
                " ".join(methods))
            t.expect(ok is not None, "tool %s: notifications in the order "
                     "%s" % (tid, methods))

    def network(self):
        """Network by name (PROTOCOL.md §7.2): ToolDefs and a session's
        sandbox with rules against the schemas, refusals at createSession,
        and where initialize reports networkRules, a tool's meta.network
        with a reached and a refused host."""
        t = self.t
        N = Conn(t, "N")
        rules = {"allow": ["localhost:1-65535", "*.pythonhosted.org",
                           "[2001:db8::]/32"], "deny": ["evil.test"]}
        for net in (True, False, rules, {}, {"allow": None}):
            d = sh_tool("n", sandbox={"mode": "read-only", "network": net})
            t.validate("tooldef", d, "a ToolDef with network %r (schema "
                       "bug)" % (net,))
        for net in ({"allow": "a.test"}, {"allow": [1]}, {"permit": []},
                    {"allow": ["a.test"] * 257}, {"allow": [""]}):
            d = sh_tool("n", sandbox={"mode": "read-only", "network": net})
            t.expect(t.schemas.errors("tooldef", d) != [],
                     "tooldef.schema.json accepts network %s" %
                     json.dumps(net)[:80])
        N.call_error("createSession", {"sandbox": {
            "mode": "read-only", "network": {"allow": ["http://a.test"]}}},
            -32602, field="sandbox")
        N.call_error("createSession", {"tools": [sh_tool("n", sandbox={
            "mode": "none", "network": {"allow": ["a.test"]}})]}, -32602,
            field="tools[0]")
        init = N.call("initialize") or {}
        sb = init.get("capabilities", {}).get("enforcement", {}).get(
            "sandbox", {})
        t.expect(isinstance(sb.get("networkRules"), bool),
                 "initialize: sandbox.networkRules %r" %
                 (sb.get("networkRules"),))
        if sb.get("networkRules") is not True:
            t.expect(isinstance(sb.get("whyNot", {}).get("networkRules"),
                                str), "initialize: networkRules false and "
                     "no whyNot.networkRules: %r" % (sb,))
            print("network: meta.network not checked: %s" %
                  sb.get("whyNot", {}).get("networkRules"))
            return

        # A server on the daemon's loopback the tool may reach.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
        served = threading.Thread(target=lambda: [
            c.sendall(c.recv(100)) or c.close()
            for c in [srv.accept()[0]]], daemon=True)
        served.start()
        probe = (
            "import os, socket\n"
            "port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n"
            "def connect(target, word):\n"
            "    s = socket.create_connection(('127.0.0.1', port))\n"
            "    s.sendall(b'CONNECT ' + target + b' HTTP/1.1\\r\\n\\r\\n')\n"
            "    head = b''\n"
            "    while b'\\r\\n\\r\\n' not in head:\n"
            "        head += s.recv(1)\n"
            "    s.sendall(word)\n"
            "    print(head.split(b'\\r\\n')[0].decode(), s.recv(100))\n"
            "connect(b'localhost:PORT', b'ping')\n"
            "connect(b'evil.test:443', b'')\n").replace("PORT", str(port))
        cs = N.call("createSession", {
            "tools": [{"name": "py", "command": [sys.executable, "-c",
                                                 probe]}],
            "sandbox": {"mode": "read-only", "network": {
                "allow": ["localhost:%d" % port, "LOCALHOST:%d" % port],
                "deny": ["evil.test"]}}})
        if cs is None:
            srv.close()
            return
        sid = cs["sessionId"]
        t.expect(N.call("subscribe", {"sessionId": sid, "since": 0}) ==
                 {"lastSeq": 0}, "subscribe on the network session")
        N.seq[sid] = 1
        self.add(N, sid, "net1", "py", {})
        self.drain(N, sid, 1, 1)
        p = N.result_of("net1")
        self.check_result(p, "ok")
        net = p["meta"].get("network", {})
        t.expect([(e.get("host"), e.get("port"), e.get("connections"),
                   e.get("bytesOut"), e.get("bytesIn"))
                  for e in net.get("reached", [])] ==
                 [("localhost", port, 1, 4, 4)],
                 "meta.network.reached: %r" % net)
        t.expect([(e.get("host"), e.get("port"), e.get("connections"))
                  for e in net.get("refused", [])] ==
                 [("evil.test", 443, 1)] and "deny rule \"evil.test\"" in
                 net["refused"][0].get("why", ""),
                 "meta.network.refused: %r" % net)
        t.expect(" 403 " in p["result"]["content"],
                 "the refused CONNECT got 403: %r" % p["result"]["content"])
        N.call("closeSession", {"sessionId": sid})
        served.join(10)
        srv.close()


def main():
    daemon = os.environ.get("STEXEC_DAEMON")
    if not daemon:
        print("STEXEC_DAEMON is not set: skipped")
        return 77
    t = Test(daemon)
    ok = False
    try:
        t.start()
        Scenario(t).run()
        ok = True
    except (Timeout, RuntimeError, OSError, KeyError) as e:
        t.fail("the run stopped: %s: %s" % (type(e).__name__, e))
    finally:
        t.stop()
    print("%d lines from the daemon checked, %d failures" %
          (t.lines, len(t.failures)))
    if t.failures or not ok:
        tail = t.daemon_log_tail()
        if tail:
            print("--- daemon log (tail) ---\n" + tail, file=sys.stderr)
        print("kept %s for inspection" % t.tmp, file=sys.stderr)
        return 1
    shutil.rmtree(t.tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
