"""The asyncio flavour of the stexec client: the same methods, awaited.

    import asyncio
    from stexec import aio

    async def main():
        async with aio.Client() as c:             # the default socket
            sid = await c.create_session()
            turn = aio.Turn(c, sid)               # subscribes on first use
            await turn.add("toolu_01", "bash", {"command": "uname -a"})
            async for note in turn.finish():      # drain; progress as it comes
                print(note.method, note.tool_use_id)
            print(turn.results)                   # tool_result blocks, in order

    asyncio.run(main())

One task reads the socket and files responses by id and notifications in
a queue, so any number of tasks may send requests at once. Let one task
consume a session's notifications.

Client-run tools: ``await c.session(sid).serve({"Task": handler})``, where
``async def handler(input, call)`` returns the result and is cancelled on
tool_cancel (``call.cancelled`` is set too); see ``Client.serve``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import threading
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict,
                    List, Mapping, Optional, Union)

from . import (AddToolResult, ConnectionLost, Content, DiscardResult,
               DrainResult, Notification, SERVE_METHODS, Session,
               StexecConnectionError, StexecError, ToolCall, _Call,
               _check_version, _error_params, _outcome_params, _Serving,
               _deadline, _JobCursor, _left, _Lines, _params,
               _read_job_params, _request_line, _result_of, _is_response,
               _decode, _Seqs, _session_params, _take, _tool_use_params,
               _TurnState, _wait_timeout, _write_params,
               default_socket_path)

__all__ = ["Client", "Turn", "JobOutput"]


class Client:
    """One connection to stexecd, for asyncio.

    ``path``: the socket; default ``default_socket_path()``.
    ``timeout``: how long a request waits for its response, in seconds
    (None: for ever). Connect with ``async with Client() as c`` or
    ``await c.connect()``.
    """

    def __init__(self, path: Optional[str] = None, *,
                 timeout: Optional[float] = None):
        self.path = path if path else default_socket_path()
        self.timeout = timeout
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional[asyncio.Task] = None
        self._gen = 0                      # bumped on every (re)connect
        self._broken: Optional[ConnectionLost] = ConnectionLost(
            "not connected to %s" % self.path)
        self._next_id = 0
        self._pending: Dict[int, asyncio.Future] = {}
        self._queue: Deque[Notification] = collections.deque()
        self._seqs = _Seqs()
        self._arrived: Optional[asyncio.Event] = None
        self._wlock: Optional[asyncio.Lock] = None
        self._serving = _Serving()

    # -------------------------------------------------------- connection

    async def connect(self, timeout: float = 0.0) -> None:
        """Connect to ``self.path``, retrying for up to ``timeout`` seconds
        (a daemon that is starting). Raises StexecConnectionError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(self.path)
                break
            except OSError as e:
                if loop.time() >= deadline:
                    raise StexecConnectionError(
                        "cannot connect to %s: %s; is stexecd running?"
                        % (self.path, e.strerror or e)) from e
                await asyncio.sleep(0.05)
        await self._drop(ConnectionLost("the connection was replaced"))
        if self._arrived is None:
            self._arrived = asyncio.Event()
            self._wlock = asyncio.Lock()
        self._gen += 1
        self._writer = writer
        self._broken = None
        self._reader_task = asyncio.ensure_future(
            self._read(reader, self._gen))

    async def close(self) -> None:
        """Close the connection. Sessions live on in the daemon (and their
        tools keep running); ``reconnect()`` resumes."""
        await self._drop(ConnectionLost("connection closed"))

    async def reconnect(self, timeout: float = 5.0,
                        resubscribe: bool = True) -> None:
        """Open a new connection and resubscribe to every session this
        client was subscribed to, from the last seq it received: nothing
        missed, and the replayed notifications it already has are dropped.
        A -32004 replay gap (StexecError, ``data["oldestSeq"]``) means the
        daemon no longer holds what was missed; see PROTOCOL.md §2."""
        self._serving.held = True
        try:
            await self.close()
            await self.connect(timeout)
            if resubscribe:
                for sid in sorted(self._seqs.subscribed):
                    await self.subscribe(sid,
                                         since=self._seqs.last.get(sid, 0))
            # Claim the served names again. takeOver: the daemon may not
            # have seen the old connection close yet, and its claims are
            # this client's.
            for sid, names in self._serving.claims():
                await self.request("serveTools", {"sessionId": sid,
                                                  "names": names,
                                                  "takeOver": True})
        finally:
            for call in self._serving.release():
                asyncio.ensure_future(self._complete(call))

    async def __aenter__(self) -> "Client":
        if self._writer is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._broken is None

    def last_seq(self, session_id: str) -> int:
        """The seq of the newest notification received for the session."""
        return self._seqs.last.get(session_id, 0)

    async def _drop(self, why: ConnectionLost) -> None:
        """End the present connection: its requests fail with ``why``."""
        writer, task = self._writer, self._reader_task
        self._writer = self._reader_task = None
        self._fail(why)
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    def _fail(self, why: ConnectionLost) -> None:
        if self._broken is None:
            self._broken = why
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._broken)
        self._wake()

    def _wake(self) -> None:
        """Tell every waiter that something arrived (or broke)."""
        if self._arrived is not None:
            self._arrived.set()
            self._arrived = asyncio.Event()

    async def _arrival(self, timeout: Optional[float]) -> None:
        """Wait until something arrives, at most ``timeout`` seconds."""
        assert self._arrived is not None
        try:
            await asyncio.wait_for(self._arrived.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def _read(self, reader: asyncio.StreamReader, gen: int) -> None:
        """The reading task of one connection."""
        lines = _Lines()
        why: Optional[ConnectionLost] = None
        try:
            while why is None:
                data = await reader.read(1 << 18)
                if not data:
                    why = ConnectionLost("stexecd closed the connection")
                    break
                for line in lines.feed(data):
                    msg = _decode(line)
                    if msg is None:
                        continue
                    if not _is_response(msg):
                        if msg["method"] in SERVE_METHODS:
                            self._on_serve(msg)
                            continue
                        note = self._seqs.accept(msg)
                        if note is not None:
                            self._queue.append(note)
                            if note.method == "session_closed":
                                self._forget_serving(note.session_id)
                        continue
                    fut = self._pending.get(msg["id"])
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                self._wake()
        except ConnectionLost as e:
            why = e
        except OSError as e:
            why = ConnectionLost("connection to %s lost: %s" % (self.path, e))
        finally:
            if gen == self._gen and why is not None:
                self._fail(why)

    # -------------------------------------------------------- requests

    async def send_request(self, method: str,
                           params: Optional[Mapping[str, Any]] = None) -> int:
        """Send a request without waiting for its answer; returns its id
        for ``wait_response``."""
        if self._writer is None or self._broken is not None:
            raise ConnectionLost("not connected to %s (%s)"
                                 % (self.path, self._broken or "closed"))
        self._next_id += 1
        rid = self._next_id
        self._pending[rid] = asyncio.get_running_loop().create_future()
        writer = self._writer
        writer.write(_request_line(rid, method, params))
        assert self._wlock is not None
        try:
            async with self._wlock:     # one drain at a time (Python < 3.10)
                await writer.drain()
        except OSError as e:
            self._pending.pop(rid, None)
            if writer is self._writer:
                self._fail(ConnectionLost("connection to %s lost: %s"
                                          % (self.path, e)))
            raise ConnectionLost("connection to %s lost: %s"
                                 % (self.path, e)) from e
        return rid

    async def wait_response(self, request_id: int,
                            timeout: Optional[float] = None) -> Any:
        """The result of the request ``request_id``; raises StexecError
        for an error answer, TimeoutError, ConnectionLost."""
        fut = self._pending.get(request_id)
        if fut is None:
            raise KeyError("no request %d is waiting" % request_id)
        # asyncio.wait, not wait_for: before Python 3.12 wait_for can lose
        # a cancel of the caller (a served tool's task on tool_cancel) when
        # the answer comes in the same pass of the loop.
        done, _ = await asyncio.wait({fut}, timeout=timeout)
        if not done:
            raise TimeoutError("no answer to request %d from stexecd at %s "
                               "within %s s" % (request_id, self.path,
                                                timeout))
        msg = fut.result()
        self._pending.pop(request_id, None)
        return _result_of(msg)

    def forget_response(self, request_id: int) -> None:
        """Nobody will wait for this request: drop its response."""
        fut = self._pending.pop(request_id, None)
        if fut is not None:
            if fut.done():
                fut.exception()         # retrieved: no "never retrieved"
            else:
                fut.cancel()

    def response_ready(self, request_id: int) -> bool:
        fut = self._pending.get(request_id)
        return fut is not None and fut.done()

    async def request(self, method: str,
                      params: Optional[Mapping[str, Any]] = None,
                      timeout: Optional[float] = None) -> Any:
        """Send a request and wait for its result (``timeout`` defaults to
        the client's). Notifications arriving meanwhile are queued."""
        rid = await self.send_request(method, params)
        try:
            return await self.wait_response(
                rid, self.timeout if timeout is None else timeout)
        finally:
            self.forget_response(rid)

    async def call(self, method: str, **params: Any) -> Any:
        """``await call("addTool", sessionId=s, toolUse={...})``: wire
        names, as in PROTOCOL.md. Returns ``result``; raises StexecError."""
        return await self.request(method, params)

    # -------------------------------------------------------- notifications

    async def next_notification(self, timeout: Optional[float] = None,
                                session_id: Optional[str] = None
                                ) -> Optional[Notification]:
        """The oldest queued notification (of ``session_id`` if given),
        waiting up to ``timeout`` seconds (None: for ever, 0: only what has
        arrived); None on timeout. Queued notifications are returned even
        after the connection broke; then ConnectionLost."""
        deadline = _deadline(timeout)
        while True:
            note = _take(self._queue, session_id)
            if note is not None:
                return note
            if self._broken is not None:
                raise ConnectionLost(str(self._broken)) from self._broken
            left = _left(deadline)
            if left is not None and left <= 0:
                return None
            await self._arrival(left)

    async def notifications(self, timeout: Optional[float] = None,
                            session_id: Optional[str] = None
                            ) -> AsyncIterator[Notification]:
        """``async for``: notifications as they arrive. Stops after
        ``timeout`` seconds without one (None: never stops on its own)."""
        while True:
            note = await self.next_notification(timeout, session_id)
            if note is None:
                return
            yield note

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self.notifications()

    # -------------------------------------------------------- methods

    async def initialize(self, name: str = "stexec.py",
                         version: str = "0.1.0") -> Dict[str, Any]:
        """Learn the server's version and limits (optional)."""
        return _check_version(await self.call(
            "initialize", client={"name": name, "version": version}))

    async def create_session(self,
                             tools: Optional[List[Dict[str, Any]]] = None,
                             max_parallel: Optional[int] = None,
                             cwd: Optional[str] = None,
                             env: Optional[Mapping[str, Optional[str]]] = None,
                             sandbox: Any = None,
                             shell: Optional[Mapping[str, Any]] = None
                             ) -> str:
        """Create a session; returns its id. ``tools``: ToolDefs added to
        the daemon's; ``env``: on top of the daemon's, None unsets;
        ``sandbox``: the profile of its tools that have none, as for
        the blocking client (``network`` rules included); ``shell``: as
        for the blocking client."""
        sid = (await self.request("createSession", _session_params(
            tools, max_parallel, cwd, env, sandbox, shell)))["sessionId"]
        self._seqs.created(sid)
        return sid

    async def close_session(self, session_id: str) -> None:
        """Close a session; returns once its tools' processes are dead."""
        await self.request("closeSession", {"sessionId": session_id})
        self._seqs.subscribed.discard(session_id)
        self._forget_serving(session_id)

    # ------------------ client-run tools (PROTOCOL.md §4, Client-run tools)

    def session(self, session_id: str) -> Session:
        """A view of one session: ``await c.session(sid).serve({...})``."""
        return Session(self, session_id)

    async def serve(self, session_id: str,
                    handlers: Mapping[str, Callable[..., Any]],
                    take_over: bool = False,
                    on_error: Optional[Callable[..., Any]] = None
                    ) -> List[str]:
        """(extension) Run the session's client-run tools (``"runner":
        "client"``) of these names in this client; returns the names
        claimed (serveTools).

        For each tool_start, ``handlers[name](input, call)`` runs: a
        coroutine function as a task, with ``call.cancelled`` an
        asyncio.Event and ``await call.progress(data)``; on tool_cancel the
        event is set and the task cancelled (a CancelledError it lets out
        is an error result; one it catches lets it return a result). A
        plain function runs in a thread, with ``call.cancelled`` a
        threading.Event and ``call.progress(data)`` a plain call. The
        return value (a string, content blocks, or ``{"content": ...,
        "isError": bool}``) goes back with completeTool; an exception is an
        error result with its message. ``reconnect()`` claims the names
        again; ``take_over`` as in the blocking client; ``on_error(err,
        call)`` is told when a result could not be handed back."""
        before = self._serving.register(session_id, handlers, on_error)
        params: Dict[str, Any] = {"sessionId": session_id,
                                  "names": sorted(handlers)}
        if take_over:
            params["takeOver"] = True
        try:
            return (await self.request("serveTools", params))["names"]
        except StexecError:
            self._serving.undo(session_id, before)
            raise

    def served_names(self, session_id: str) -> List[str]:
        """(extension) The names this client serves in the session."""
        return sorted(self._serving.handlers.get(session_id, {}))

    async def tool_progress(self, session_id: str, tool_use_id: str,
                            progress: Any) -> None:
        """(extension) Progress of a client-run tool this connection runs."""
        await self.request("toolProgress", {"sessionId": session_id,
                                            "toolUseId": tool_use_id,
                                            "progress": progress})

    async def complete_tool(self, session_id: str, tool_use_id: str,
                            content: Content, is_error: bool = False) -> None:
        """(extension) The result of a client-run tool."""
        params: Dict[str, Any] = {"sessionId": session_id,
                                  "toolUseId": tool_use_id,
                                  "content": content}
        if is_error:
            params["isError"] = True
        await self.request("completeTool", params)

    def _forget_serving(self, session_id: Optional[str]) -> None:
        if session_id is None:
            return
        for call in self._serving.forget(session_id):
            self._cancel(call)

    def _cancel(self, call: _Call) -> None:
        if call.ctx is None:
            return
        call.ctx.cancelled.set()
        if call.cancels_task:
            call.worker.cancel()

    def _on_serve(self, msg: Dict[str, Any]) -> None:
        """tool_start and tool_cancel, in the reading task."""
        params = msg.get("params")
        if not isinstance(params, dict):
            return
        if msg["method"] == "tool_cancel":
            call = self._serving.cancel(params)
            if call is not None:
                self._cancel(call)
            return
        action, call, handler = self._serving.start(params)
        if call is None or action == "ignore":
            return
        if action != "run":
            call.worker = asyncio.ensure_future(self._complete(call))
            return
        sid, tid = call.session_id, call.tool_use_id
        if inspect.iscoroutinefunction(handler):
            call.ctx = ToolCall(sid, params, asyncio.Event(),
                                lambda data: self.tool_progress(sid, tid,
                                                                data))
            call.worker = asyncio.ensure_future(self._run_task(call,
                                                               handler))
            call.cancels_task = True
        else:
            loop = asyncio.get_running_loop()
            call.ctx = ToolCall(
                sid, params, threading.Event(),
                lambda data: asyncio.run_coroutine_threadsafe(
                    self.tool_progress(sid, tid, data), loop).result())
            call.worker = asyncio.ensure_future(self._run_thread(call,
                                                                 handler))

    async def _run_task(self, call: _Call,
                        handler: Callable[..., Any]) -> None:
        ctx = call.ctx
        assert ctx is not None
        try:
            params = _outcome_params(call.session_id, call.tool_use_id,
                                     await handler(ctx.input, ctx))
        except asyncio.CancelledError:
            if ctx.cancel_reason is None:
                raise                # not ours: the loop is going away
            params = _error_params(call.session_id, call.tool_use_id,
                                   Exception("cancelled (%s)"
                                             % ctx.cancel_reason))
        except Exception as e:       # any failure is the tool's result
            params = _error_params(call.session_id, call.tool_use_id, e)
        await self._finish(call, params)

    async def _run_thread(self, call: _Call,
                          handler: Callable[..., Any]) -> None:
        ctx = call.ctx
        assert ctx is not None

        def run() -> Dict[str, Any]:
            try:
                return _outcome_params(call.session_id, call.tool_use_id,
                                       handler(ctx.input, ctx))
            except BaseException as e:   # any failure is the tool's result
                return _error_params(call.session_id, call.tool_use_id, e)
        loop = asyncio.get_running_loop()
        # Shielded: a cancel sets the event; the thread cannot be stopped.
        params = await asyncio.shield(loop.run_in_executor(None, run))
        await self._finish(call, params)

    async def _finish(self, call: _Call, params: Dict[str, Any]) -> None:
        call.cancels_task = False      # never cancel the completeTool
        key = (call.session_id, call.tool_use_id)
        if self._serving.calls.get(key) is not call:
            return                   # its session is gone
        call.outcome = params
        await self._complete(call)

    async def _complete(self, call: _Call) -> None:
        if call.sending or call.outcome is None or self._serving.held:
            return
        call.sending = True
        err: Optional[BaseException] = None
        try:
            await self.request("completeTool", call.outcome)
        except (StexecError, ConnectionLost, TimeoutError, OSError) as e:
            err = e
        tell = self._serving.sent(call, err)
        if tell is not None:
            tell(err, call)

    async def list_sessions(self) -> List[Dict[str, Any]]:
        """[{sessionId, turn, unfinished}] of this user."""
        return (await self.request("listSessions", {}))["sessions"]

    async def list_tools(self, session_id: Optional[str] = None
                         ) -> List[Dict[str, Any]]:
        """The daemon's ToolDefs, or a session's."""
        return (await self.request(
            "listTools", _params({}, sessionId=session_id)))["tools"]

    async def add_tool(self, session_id: str, id: str, name: str,
                       input: Optional[Mapping[str, Any]] = None
                       ) -> AddToolResult:
        """Hand one tool_use block to the session's current turn."""
        return await self.request(
            "addTool", _tool_use_params(session_id, id, name, input))

    async def abort(self, session_id: str, reason: str = "interrupt") -> int:
        """Abort the current turn ("interrupt": like Esc; "cancel": kill
        everything). Returns the turn; you still drain it."""
        return (await self.request("abort", {"sessionId": session_id,
                                             "reason": reason}))["turn"]

    async def discard(self, session_id: str) -> DiscardResult:
        """Throw the current turn away; nothing more of it is delivered."""
        return await self.request("discard", {"sessionId": session_id})

    async def drain(self, session_id: str,
                    timeout: Optional[float] = None) -> DrainResult:
        """End the turn: returns after its last tool_result and turn_end
        (which are then queued, if subscribed). ``Turn.finish`` does the
        same while yielding progress."""
        return await self.request("drain", {"sessionId": session_id},
                                  timeout)

    async def respond_permission(self, session_id: str, tool_use_id: str,
                                 decision: str,
                                 message: Optional[str] = None) -> None:
        """Answer a permission_request: decision "allow" or "deny"."""
        await self.request("respondPermission", _params(
            {"sessionId": session_id, "toolUseId": tool_use_id,
             "decision": decision}, message=message))

    async def subscribe(self, session_id: str,
                        since: Optional[int] = None) -> int:
        """Receive the session's notifications on this connection; returns
        the session's last seq. ``since`` as in the blocking client: by
        default from the last notification this client received of the
        session (or of a session it created), else only live ones."""
        since = self._seqs.since(session_id, since)
        last = (await self.request("subscribe", _params(
            {"sessionId": session_id}, since=since)))["lastSeq"]
        self._seqs.subscribed_at(session_id, since, last)
        return last

    async def unsubscribe(self, session_id: str) -> None:
        await self.request("unsubscribe", {"sessionId": session_id})
        self._seqs.subscribed.discard(session_id)

    async def events(self, session_id: str, since: Optional[int] = None,
                     max: Optional[int] = None) -> Dict[str, Any]:
        """Pull instead of push: {notifications: [raw objects], lastSeq}."""
        return await self.request("events", _params(
            {"sessionId": session_id}, since=since, max=max))

    async def status(self, session_id: str) -> Dict[str, Any]:
        """{turn, interruptible, tools: [{id, name, status, ...}]}."""
        return await self.request("status", {"sessionId": session_id})

    async def ping(self) -> None:
        await self.request("ping", {})

    async def stats(self) -> Dict[str, Any]:
        return await self.request("stats", {})

    async def metrics(self) -> Dict[str, Any]:
        """(extension) {metrics: [family]} (PROTOCOL.md, metrics)."""
        return await self.request("metrics", {})

    # ---------------------------------------- jobs (PROTOCOL.md §4, Jobs)

    async def list_jobs(self, session_id: str) -> List[Dict[str, Any]]:
        """(extension) The session's jobs, as ``stexec.Client.list_jobs``."""
        return (await self.request("listJobs",
                                   {"sessionId": session_id}))["jobs"]

    async def read_job(self, session_id: str, job_id: str,
                       since: Optional[int] = None,
                       max_bytes: Optional[int] = None,
                       wait_ms: Optional[int] = None,
                       filter: Optional[str] = None) -> Dict[str, Any]:
        """(extension) {text, offset, next, dropped, status, exitCode,
        signal}, as ``stexec.Client.read_job``."""
        return await self.request("readJob", _read_job_params(
            session_id, job_id, since, max_bytes, wait_ms, filter),
            _wait_timeout(self.timeout, wait_ms))

    async def write_job(self, session_id: str, job_id: str, data: str,
                        eof: bool = False) -> int:
        """(extension) Bytes for the job's stdin; ``eof`` closes it."""
        return (await self.request("writeJob", _write_params(
            {"sessionId": session_id, "jobId": job_id}, data, eof)
        ))["written"]

    async def signal_job(self, session_id: str, job_id: str,
                         signal: str = "terminate") -> None:
        """(extension) "interrupt", "terminate" or "kill"."""
        await self.request("signalJob", {"sessionId": session_id,
                                         "jobId": job_id, "signal": signal})

    async def resize_job(self, session_id: str, job_id: str, cols: int,
                         rows: int) -> None:
        """(extension) The size of the job's terminal."""
        await self.request("resizeJob", {"sessionId": session_id,
                                         "jobId": job_id, "cols": cols,
                                         "rows": rows})

    async def write_stdin(self, session_id: str, tool_use_id: str,
                          data: str, eof: bool = False) -> int:
        """(extension) Input for a running ``stdin: "stream"`` tool."""
        return (await self.request("writeStdin", _write_params(
            {"sessionId": session_id, "toolUseId": tool_use_id}, data, eof)
        ))["written"]

    def job_output(self, session_id: str, job_id: str, since: int = 0,
                   filter: Optional[str] = None, wait_ms: int = 30000,
                   max_bytes: Optional[int] = None) -> "JobOutput":
        """(extension) ``async for text in c.job_output(sid, jid)``: the
        job's output as it comes, until it has ended and all is read."""
        return JobOutput(self, session_id, job_id, since, filter, wait_ms,
                         max_bytes)


class JobOutput(_JobCursor):
    """The asyncio ``stexec.JobOutput``: an async iterator over a job's
    output, with ``last`` the last readJob result once done."""

    def __init__(self, client: Client, session_id: str, job_id: str,
                 since: int = 0, filter: Optional[str] = None,
                 wait_ms: int = 30000, max_bytes: Optional[int] = None):
        super().__init__(session_id, job_id, since, filter, wait_ms,
                         max_bytes)
        self.client = client

    def __aiter__(self) -> "JobOutput":
        return self

    async def __anext__(self) -> str:
        while not self.done:
            res = await self.client.request(
                "readJob", self.params(),
                _wait_timeout(self.client.timeout, self.wait_ms))
            if self.advance(res):
                await asyncio.sleep(self.pause)
            if res["text"]:
                return res["text"]
        raise StopAsyncIteration


class Turn(_TurnState):
    """The blocking ``stexec.Turn``, for asyncio: ``await add`` each
    tool_use block the moment the stream has parsed it, ``async for`` over
    ``poll()`` to show progress meanwhile, and ``async for`` over
    ``finish()`` when the message is complete; then ``results`` holds the
    tool_result blocks in add order. The session is subscribed on first
    use (from its start if this client created it, so nothing is missed).
    """

    def __init__(self, client: Client, session_id: str):
        super().__init__(client, session_id)

    async def _subscribed(self) -> None:
        if self.session_id not in self.client._seqs.subscribed:
            await self.client.subscribe(self.session_id)

    async def add(self, id: str, name: str,
                  input: Optional[Mapping[str, Any]] = None
                  ) -> AddToolResult:
        """Add one tool (start it as early as safety allows)."""
        await self._subscribed()
        return self._added(id, await self.client.add_tool(
            self.session_id, id, name, input))

    async def add_block(self, block: Mapping[str, Any]) -> AddToolResult:
        """Add a model tool_use block ({type, id, name, input})."""
        return await self.add(block["id"], block["name"], block.get("input"))

    async def poll(self, timeout: float = 0.0
                   ) -> AsyncIterator[Notification]:
        """Yield what has arrived for this session, waiting at most
        ``timeout`` seconds for the first one."""
        await self._subscribed()
        while True:
            note = await self.client.next_notification(timeout,
                                                       self.session_id)
            if note is None:
                return
            self._see(note)
            yield note
            timeout = 0.0

    async def interrupt(self, reason: str = "interrupt") -> None:
        """The user pressed Esc ("interrupt") or wants everything killed
        ("cancel"); another task may call it while one iterates finish()."""
        await self.client.abort(self.session_id, reason)

    async def finish(self, timeout: Optional[float] = None
                     ) -> AsyncIterator[Notification]:
        """Drain: yield notifications until the turn's last tool_result and
        turn_end have arrived and the drain is answered. TimeoutError after
        ``timeout`` seconds in all."""
        await self._subscribed()
        c, sid = self.client, self.session_id
        deadline = _deadline(timeout)
        rid = await c.send_request("drain", {"sessionId": sid})
        try:
            while True:
                note = _take(c._queue, sid)
                if note is not None:
                    self._see(note)
                    yield note
                    continue
                # The drain response comes after turn_end (PROTOCOL.md §3.5),
                # so everything of the turn has been yielded by now.
                if c.response_ready(rid):
                    self._drain_done(await c.wait_response(rid, 0))
                    return
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise TimeoutError("turn %s not drained in time"
                                       % self.number)
                await c._arrival(left)
        finally:
            c.forget_response(rid)

    async def run(self, tool_uses: List[Mapping[str, Any]],
                  on_notification: Optional[Callable[
                      [Notification], Union[None, Awaitable[None]]]] = None
                  ) -> List[Dict[str, Any]]:
        """Add every tool_use block, drain, return the results in order.
        ``on_notification`` may be a plain function or a coroutine one."""
        for block in tool_uses:
            await self.add_block(block)
        async for note in self.finish():
            if on_notification is not None:
                ret = on_notification(note)
                if ret is not None:
                    await ret
        return self.results
