"""
A small stand-in for stexecd that answers the job methods of PROTOCOL.md
§4, Jobs, on a real Unix socket, for the Python clients' tests: one
session, jobs whose output the test appends, stdin echoed back like `cat`,
long polls that wait for output or the end, and -32601 for the methods
named in ``missing``. It tests the clients' logic, not the daemon.
"""
import json
import os
import re
import socket
import tempfile
import threading
import time

SESSION = "s-fake"


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Job:
    def __init__(self, jid, tty, echo):
        self.info = {"jobId": jid, "toolUseId": "t-" + jid, "name": "bash",
                     "command": ["/bin/bash", "-c", "cat"], "pid": 4242,
                     "status": "running", "startedAt": int(time.time() * 1000),
                     "exitCode": None, "signal": None, "reason": None,
                     "outputBytes": 0, "tty": tty}
        self.out = ""
        self.cursor = 0
        self.stdin = ""
        self.stdin_closed = False
        self.size = (80, 24)
        self.echo = echo


class FakeDaemon:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="stexec-py-fake-")
        self.sock = os.path.join(self.dir, "s.sock")
        self.jobs = {}
        self.requests = []          # (method, params) in order
        self.missing = set()
        self.streaming = set()
        self.cond = threading.Condition()
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(self.sock)
        self.srv.listen(8)
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.srv.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            os.unlink(self.sock)
            os.rmdir(self.dir)
        except OSError:
            pass

    # ------------------------------------------------ what the test does

    def add_job(self, tty=False, echo=False):
        with self.cond:
            jid = "j-%d" % (len(self.jobs) + 1)
            self.jobs[jid] = Job(jid, tty, echo)
            return self.jobs[jid]

    def output(self, job, text):
        with self.cond:
            job.out += text
            job.info["outputBytes"] = len(job.out)
            self.cond.notify_all()

    def exit(self, job, exit_code=0, signal=None, killed=False):
        with self.cond:
            i = job.info
            i["status"] = "killed" if killed else "exited"
            i["exitCode"] = exit_code if signal is None else None
            i["signal"] = signal
            i["reason"] = ("killed" if killed else "signal" if signal
                           else "ok" if exit_code == 0 else "exit")
            i["pid"] = None
            self.cond.notify_all()

    def later(self, seconds, fn, *args):
        t = threading.Timer(seconds, fn, args)
        t.daemon = True
        t.start()

    def reads_of(self, jid):
        return [p for m, p in self.requests
                if m == "readJob" and p.get("jobId") == jid]

    # ------------------------------------------------ the wire

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,),
                             daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rb")
        wlock = threading.Lock()
        for line in f:
            msg = json.loads(line)
            threading.Thread(target=self._answer, args=(c, wlock, msg),
                             daemon=True).start()

    def _answer(self, c, wlock, msg):
        params = msg.get("params") or {}
        with self.cond:
            self.requests.append((msg["method"], params))
        try:
            reply = {"result": self._call(msg["method"], params)}
        except RpcError as e:
            err = {"code": e.code, "message": e.message}
            if e.data is not None:
                err["data"] = e.data
            reply = {"error": err}
        reply.update(jsonrpc="2.0", id=msg["id"])
        with wlock:
            try:
                c.sendall((json.dumps(reply) + "\n").encode())
            except OSError:
                pass

    def _job(self, params):
        if params.get("sessionId") != SESSION:
            raise RpcError(-32001, "Unknown session")
        job = self.jobs.get(params.get("jobId"))
        if job is None:
            raise RpcError(-32602, "Invalid params: jobId: no such job",
                           {"field": "jobId"})
        return job

    def _call(self, method, params):
        if method in self.missing:
            raise RpcError(-32601, "Method not found: " + method)
        if method == "ping":
            return {}
        if method == "listJobs":
            with self.cond:
                return {"jobs": [dict(j.info) for j in self.jobs.values()]}
        if method == "readJob":
            return self._read(self._job(params), params)
        if method == "writeJob":
            job = self._job(params)
            if job.info["status"] != "running":
                raise RpcError(-32005, "State conflict: job %s has ended"
                               % job.info["jobId"])
            if job.stdin_closed:
                raise RpcError(-32005, "State conflict: job %s: its stdin "
                               "is closed" % job.info["jobId"])
            job.stdin += params["data"]
            job.stdin_closed = bool(params.get("eof"))
            if job.echo:
                if params["data"]:
                    self.output(job, params["data"])
                if job.stdin_closed:
                    self.exit(job)
            return {"written": len(params["data"].encode())}
        if method == "signalJob":
            job = self._job(params)
            if job.info["status"] != "running":
                raise RpcError(-32005, "State conflict: job %s has ended"
                               % job.info["jobId"])
            sig = {"interrupt": 2, "terminate": 15, "kill": 9}.get(
                params.get("signal"))
            if sig is None:
                raise RpcError(-32602, "Invalid params: signal",
                               {"field": "signal"})
            self.exit(job, signal=sig, killed=True)
            return {}
        if method == "resizeJob":
            job = self._job(params)
            if not job.info["tty"]:
                raise RpcError(-32005, "State conflict: job %s has no "
                               "terminal" % job.info["jobId"])
            job.size = (params["cols"], params["rows"])
            return {}
        if method == "writeStdin":
            if params.get("toolUseId") not in self.streaming:
                raise RpcError(-32602, "Invalid params: toolUseId: no such "
                               "tool", {"field": "toolUseId"})
            return {"written": len(params["data"].encode())}
        raise RpcError(-32601, "Method not found: " + method)

    def _read(self, job, params):
        since = params.get("since", job.cursor)
        max_bytes = params.get("maxBytes", 65536)
        wait = params.get("waitMs", 0) / 1000.0
        with self.cond:
            end = time.monotonic() + wait
            while (since >= len(job.out) and job.info["status"] == "running"
                   and time.monotonic() < end):
                self.cond.wait(end - time.monotonic())
            text = job.out[since:since + max_bytes]
            nxt = since + len(text)
            if "filter" in params:
                ended = (job.info["status"] != "running"
                         and nxt == len(job.out))
                cut = len(text) if ended else text.rfind("\n") + 1
                text, nxt = text[:cut], since + cut
                rx = re.compile(params["filter"])
                text = "".join(ln for ln in text.splitlines(True)
                               if rx.search(ln))
            if "since" not in params:
                job.cursor = nxt
            i = job.info
            return {"text": text, "offset": since, "next": nxt,
                    "dropped": False, "status": i["status"],
                    "exitCode": i["exitCode"], "signal": i["signal"]}
