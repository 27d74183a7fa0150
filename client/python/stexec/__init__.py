"""A small client for stexecd, the streaming tool executor daemon.

Standard library only (Python 3.8+). It speaks the wire protocol of
protocol/PROTOCOL.md: JSON-RPC 2.0, one JSON object per line, on a Unix
stream socket. This module is the blocking flavour; ``stexec.aio`` has the
same client and Turn for asyncio.

    from stexec import Client, Turn

    with Client() as c:                       # the default socket
        sid = c.create_session()
        turn = Turn(c, sid)                   # subscribes
        turn.add("toolu_01", "read_file", {"file_path": "/etc/hostname"})
        turn.add("toolu_02", "bash", {"command": "uname -a"})
        for note in turn.finish():            # drain; progress as it comes
            if note.method == "progress":
                print(note.tool_use_id, note.params["data"])
        for block in turn.results:            # tool_result blocks, add order
            print(block["content"])

Tools the client runs itself (ToolDefs with ``"runner": "client"``) are
served by handlers: ``c.session(sid).serve({"TodoWrite": fn})``, where
``fn(input, call)`` returns the result (a string, content blocks, or
``{"content": ..., "isError": bool}``) and ``call.cancelled`` is set on
tool_cancel; see ``Client.serve``.

Threads: the client may be shared between threads (say, a UI thread that
calls ``abort`` while another iterates a turn): requests are matched to
responses by id and whichever thread waits reads for all of them. Only one
thread should consume notifications of a given session.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Deque, Dict, Iterator, List, Mapping,
                    Optional, Set, Tuple, Union)

try:  # Python 3.8+
    from typing import TypedDict
except ImportError:  # pragma: no cover
    TypedDict = dict  # type: ignore

__version__ = "0.1.0"

__all__ = [
    "Client", "Turn", "Notification", "StexecError", "ConnectionLost",
    "JobOutput", "job_of",
    "Session", "ToolCall", "ToolCancelled", "TextBlock", "ImageBlock",
    "ImageSource", "ContentBlock", "Content", "text_block", "image_block",
    "image_media_type", "content_text", "content_images",
    "StexecConnectionError", "default_socket_path",
    "PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS",
    "INTERNAL_ERROR", "UNKNOWN_SESSION", "DUPLICATE_TOOL_USE",
    "NOT_PERMITTED", "LIMIT_EXCEEDED", "STATE_CONFLICT",
]

PROTOCOL_VERSION = 1

# JSON-RPC error codes (PROTOCOL.md §6). Match on these, not on messages.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNKNOWN_SESSION = -32001
DUPLICATE_TOOL_USE = -32002
NOT_PERMITTED = -32003
LIMIT_EXCEEDED = -32004      # also "replay gap", with data.oldestSeq
STATE_CONFLICT = -32005


# ---------------------------------------------------------------- errors

class StexecError(Exception):
    """The daemon answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__("%s (code %d)" % (message, code))
        self.code = code
        self.message = message
        self.data = data


class StexecConnectionError(ConnectionError):
    """The daemon cannot be reached (connect failed)."""


class ConnectionLost(StexecConnectionError):
    """The connection broke (or was closed) while something waited on it.

    Notifications received before the break stay queued. ``reconnect()``
    resumes every subscription where it stopped."""


# ---------------------------------------------------------------- types

class AddToolResult(TypedDict):
    toolUseId: str
    turn: int
    status: str            # queued, waiting_permission, executing, ...
    concurrencySafe: bool


class DrainResult(TypedDict):
    turn: int              # the turn that was drained
    results: int           # how many tool_results it delivered


class DiscardResult(TypedDict):
    discardedTurn: int
    turn: int


class TextBlock(TypedDict):
    """A text content block: ``{"type": "text", "text": ...}``."""
    type: str              # "text"
    text: str


class ImageSource(TypedDict):
    type: str              # "base64"
    media_type: str        # image/png, image/jpeg, image/gif, image/webp
    data: str              # base64


class ImageBlock(TypedDict):
    """An image content block, as the Messages API's."""
    type: str              # "image"
    source: ImageSource


ContentBlock = Union[TextBlock, ImageBlock]
#: A tool result's content: a string, or (extension) content blocks.
Content = Union[str, List[ContentBlock]]


def text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def image_media_type(data: bytes) -> Optional[str]:
    """The media type of an image by its magic bytes, as the daemon
    decides it: PNG, JPEG, GIF or WebP; None for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_block(data: bytes, media_type: Optional[str] = None) -> ImageBlock:
    """An image block of these bytes; the media type from the bytes when
    not given. ValueError for bytes that are no PNG, JPEG, GIF or WebP."""
    kind = media_type or image_media_type(data)
    if kind is None:
        raise ValueError("not a PNG, JPEG, GIF or WebP image (by its "
                         "first bytes)")
    return {"type": "image", "source": {
        "type": "base64", "media_type": kind,
        "data": base64.b64encode(data).decode("ascii")}}


def content_text(content: Content) -> str:
    """The text of a result's content: a string as it is, blocks' texts
    joined by newlines, each image as ``[image MEDIA_TYPE]``."""
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] if b.get("type") == "text" else
                     "[image %s]" % b["source"]["media_type"]
                     for b in content)


def content_images(content: Content) -> List[Tuple[str, bytes]]:
    """(media type, decoded bytes) of each image block, in order."""
    if isinstance(content, str):
        return []
    return [(b["source"]["media_type"], base64.b64decode(b["source"]["data"]))
            for b in content if b.get("type") == "image"]


@dataclass(frozen=True)
class Notification:
    """One server-to-client notification: ``method`` and ``params`` as on
    the wire (``raw`` is the whole message)."""

    method: str
    params: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def session_id(self) -> Optional[str]:
        return self.params.get("sessionId")

    @property
    def seq(self) -> Optional[int]:
        return self.params.get("seq")

    @property
    def turn(self) -> Optional[int]:
        return self.params.get("turn")

    @property
    def tool_use_id(self) -> Optional[str]:
        return self.params.get("toolUseId")


def default_socket_path(env: Optional[Mapping[str, str]] = None) -> str:
    """Where the daemon listens by default: $STEXEC_SOCKET, else
    $XDG_RUNTIME_DIR/stexec/stexecd.sock, else /run/stexec/stexecd.sock."""
    if env is None:
        env = os.environ
    path = env.get("STEXEC_SOCKET")
    if path:
        return path
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return os.path.join(xdg, "stexec", "stexecd.sock")
    return "/run/stexec/stexecd.sock"


class _Lines:
    """Cuts a byte stream into lines of any length; each byte is scanned
    once however the reads cut the lines (no quadratic re-scan)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0          # bytes of _buf known to hold no newline

    def feed(self, data: bytes) -> List[bytes]:
        self._buf += data
        out: List[bytes] = []
        start = 0
        while True:
            nl = self._buf.find(b"\n", max(start, self._scanned))
            if nl < 0:
                break
            out.append(bytes(self._buf[start:nl]))
            start = nl + 1
        if start:
            del self._buf[:start]
        self._scanned = len(self._buf)
        return out


def _decode(line: bytes) -> Optional[Dict[str, Any]]:
    """One line from the daemon as a response or a notification; None for
    a line to skip. ConnectionLost when the stream cannot be trusted."""
    if not line.strip():
        return None
    try:
        msg = json.loads(line.decode("utf-8"))
    except ValueError as e:
        raise ConnectionLost("stexecd sent a line that is not JSON (%s): %r"
                             % (e, line[:200])) from None
    if not isinstance(msg, dict):
        return None
    if _is_response(msg):
        if msg.get("id") is None:
            # A parse error for a line we sent: should not happen.
            raise ConnectionLost("stexecd could not read a request: %s"
                                 % json.dumps(msg.get("error")))
        return msg
    return msg if isinstance(msg.get("method"), str) else None


def _is_response(msg: Mapping[str, Any]) -> bool:
    return "id" in msg and ("result" in msg or "error" in msg)


def _result_of(msg: Mapping[str, Any]) -> Any:
    """The ``result`` of a response; StexecError for an error answer."""
    if "error" in msg:
        err = msg["error"] if isinstance(msg["error"], dict) else {}
        raise StexecError(int(err.get("code", INTERNAL_ERROR)),
                          str(err.get("message", "unknown error")),
                          err.get("data"))
    return msg.get("result")


def _request_line(rid: int, method: str,
                  params: Optional[Mapping[str, Any]]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                        "params": dict(params or {})},
                       ensure_ascii=False, separators=(",", ":"))
            .encode("utf-8") + b"\n")


def _params(required: Mapping[str, Any], **optional: Any) -> Dict[str, Any]:
    """Request params: ``required`` as given, ``optional`` (wire names)
    only when not None."""
    out = dict(required)
    out.update((k, v) for k, v in optional.items() if v is not None)
    return out


def _session_params(tools: Optional[List[Dict[str, Any]]],
                    max_parallel: Optional[int], cwd: Optional[str],
                    env: Optional[Mapping[str, Optional[str]]],
                    sandbox: Any = None,
                    shell: Optional[Mapping[str, Any]] = None
                    ) -> Dict[str, Any]:
    return _params({}, tools=None if tools is None else list(tools),
                   maxParallel=max_parallel, cwd=cwd,
                   env=None if env is None else dict(env), sandbox=sandbox,
                   shell=None if shell is None else dict(shell))


def _tool_use_params(session_id: str, id: str, name: str,
                     input: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    return {"sessionId": session_id,
            "toolUse": {"id": id, "name": name,
                        "input": {} if input is None else input}}


def _check_version(res: Dict[str, Any]) -> Dict[str, Any]:
    if res.get("protocolVersion") != PROTOCOL_VERSION:
        raise StexecError(INTERNAL_ERROR, "stexecd speaks protocol "
                          "version %r, this client %d" %
                          (res.get("protocolVersion"), PROTOCOL_VERSION))
    return res


class _Seqs:
    """What a client knows of its sessions' notification streams: the last
    seq received per session (to resume, and to drop what a replay sends
    twice) and the sessions it is subscribed to."""

    def __init__(self) -> None:
        self.last: Dict[str, int] = {}
        self.subscribed: Set[str] = set()

    def accept(self, msg: Dict[str, Any]) -> Optional[Notification]:
        """The notification, or None for a replayed one already seen."""
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        sid, seq = params.get("sessionId"), params.get("seq")
        if isinstance(sid, str) and isinstance(seq, int):
            if seq <= self.last.get(sid, 0):
                return None
            self.last[sid] = seq
        if msg["method"] == "session_closed" and isinstance(sid, str):
            self.subscribed.discard(sid)
        return Notification(msg["method"], params, msg)

    def created(self, session_id: str) -> None:
        self.last.setdefault(session_id, 0)   # seen from the start

    def since(self, session_id: str, since: Optional[int]) -> Optional[int]:
        """``since`` for a subscribe: as given, else where we stopped."""
        return self.last.get(session_id) if since is None else since

    def subscribed_at(self, session_id: str, since: Optional[int],
                      last: int) -> None:
        self.subscribed.add(session_id)
        if since is None:
            self.last.setdefault(session_id, last)


def _take(queue: Deque[Notification],
          session_id: Optional[str]) -> Optional[Notification]:
    """Remove and return the oldest queued notification (of the session
    when given)."""
    for i, n in enumerate(queue):
        if session_id is None or n.session_id == session_id:
            queue.rotate(-i)
            note = queue.popleft()
            queue.rotate(i)
            return note
    return None


def _deadline(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + max(timeout, 0.0)


def _left(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else deadline - time.monotonic()


# ---------------------------------------------------------------- client

class Client:
    """One connection to stexecd.

    ``path``: the socket; default ``default_socket_path()``.
    ``timeout``: how long a request waits for its response, in seconds
    (None: for ever; ``drain`` can legitimately take as long as the tools).
    ``connect``: False to connect later with ``connect()``.
    """

    def __init__(self, path: Optional[str] = None, *,
                 timeout: Optional[float] = None, connect: bool = True):
        self.path = path if path else default_socket_path()
        self.timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._gen = 0                      # bumped on every (re)connect
        self._lines = _Lines()
        self._cond = threading.Condition()
        self._wlock = threading.Lock()
        self._reading = False              # some thread is in recv()
        self._broken: Optional[BaseException] = None
        self._next_id = 0
        self._responses: Dict[int, Dict[str, Any]] = {}
        self._req_gen: Dict[int, int] = {}  # request id -> connection gen
        self._abandoned: Set[int] = set()  # ids nobody will wait for
        self._queue: Deque[Notification] = collections.deque()
        self._seqs = _Seqs()
        self._serving = _Serving()
        self._serve_queue: Deque[Dict[str, Any]] = collections.deque()
        self._serve_thread: Optional[threading.Thread] = None
        if connect:
            self.connect()

    # -------------------------------------------------------- connection

    def connect(self, timeout: float = 0.0) -> None:
        """Connect to ``self.path``, retrying for up to ``timeout`` seconds
        (a daemon that is starting). Raises StexecConnectionError."""
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                break
            except OSError as e:
                s.close()
                if time.monotonic() >= deadline:
                    raise StexecConnectionError(
                        "cannot connect to %s: %s; is stexecd running?"
                        % (self.path, e.strerror or e)) from e
                time.sleep(0.05)
        with self._cond:
            old, self._sock = self._sock, s
            self._gen += 1
            self._lines = _Lines()
            self._broken = None
            self._responses.clear()
            self._abandoned.clear()
            self._req_gen.clear()
            self._cond.notify_all()
        if old is not None:
            try:
                old.shutdown(socket.SHUT_RDWR)   # wakes a thread in poll
            except OSError:
                pass
            old.close()

    def close(self) -> None:
        """Close the connection. Sessions live on in the daemon (and their
        tools keep running); ``reconnect()`` resumes."""
        with self._cond:
            s, self._sock = self._sock, None
            if self._broken is None:
                self._broken = ConnectionLost("connection closed")
            self._cond.notify_all()
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def reconnect(self, timeout: float = 5.0, resubscribe: bool = True
                  ) -> None:
        """Open a new connection and resubscribe to every session this
        client was subscribed to, from the last seq it received: nothing
        missed, and the replayed notifications it already has are dropped.

        A -32004 replay gap (StexecError, ``data["oldestSeq"]``) means the
        daemon no longer holds what was missed; see PROTOCOL.md §2."""
        with self._cond:
            self._serving.held = True
        try:
            self.close()
            self.connect(timeout)
            if resubscribe:
                for sid in sorted(self._seqs.subscribed):
                    self.subscribe(sid, since=self._seqs.last.get(sid, 0))
            self._claim_again()
        finally:
            with self._cond:
                waiting = self._serving.release()
            for call in waiting:
                threading.Thread(target=self._complete, args=(call,),
                                 daemon=True).start()

    def _claim_again(self) -> None:
        """Claim the served names again after a reconnect. takeOver: the
        daemon may not have seen the old connection close yet, and its
        claims are this client's."""
        with self._cond:
            claims = self._serving.claims()
        for sid, names in claims:
            self.request("serveTools", {"sessionId": sid, "names": names,
                                        "takeOver": True})

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None and self._broken is None

    def last_seq(self, session_id: str) -> int:
        """The seq of the newest notification received for the session."""
        return self._seqs.last.get(session_id, 0)

    # -------------------------------------------------------- reading

    def _pump(self, ready: Callable[[], bool],
              deadline: Optional[float]) -> None:
        """Return once ready() holds (checked with the lock held), reading
        and dispatching lines meanwhile; one thread reads at a time, the
        others wait to be woken. TimeoutError at the deadline,
        ConnectionLost if the connection breaks first."""
        while True:
            with self._cond:
                while True:
                    if ready():
                        return
                    if self._broken is not None:
                        raise ConnectionLost(
                            str(self._broken)) from self._broken
                    if self._sock is None:
                        raise ConnectionLost("not connected to %s"
                                             % self.path)
                    left = _left(deadline)
                    if left is not None and left <= 0:
                        raise TimeoutError("no answer from stexecd in time")
                    if not self._reading:
                        break
                    self._cond.wait(left)
                self._reading = True
                sock, gen = self._sock, self._gen
            data: Optional[bytes] = None
            err: Optional[BaseException] = None
            try:
                # The socket stays blocking (another thread may be sending
                # on it): wait for input with poll, then recv.
                poller = select.poll()
                poller.register(sock, select.POLLIN)
                if poller.poll(None if left is None
                               else max(int(left * 1000) + 1, 0)):
                    data = sock.recv(1 << 18)
            except (OSError, ValueError) as e:
                err = e
            finally:
                with self._cond:
                    self._reading = False
                    if gen == self._gen and self._sock is sock:
                        if err is not None:
                            self._broken = ConnectionLost(
                                "connection to %s lost: %s"
                                % (self.path, err))
                        elif data == b"":
                            self._broken = ConnectionLost(
                                "stexecd closed the connection")
                        elif data:
                            self._dispatch(self._lines.feed(data))
                    self._cond.notify_all()

    def _dispatch(self, lines: List[bytes]) -> None:
        """File responses by id and queue notifications (lock held)."""
        for line in lines:
            try:
                msg = _decode(line)
            except ConnectionLost as e:
                self._broken = e
                return
            if msg is None:
                continue
            if _is_response(msg):
                rid = msg["id"]
                if rid in self._abandoned:
                    self._abandoned.discard(rid)
                else:
                    self._responses[rid] = msg
                continue
            if msg["method"] in SERVE_METHODS:
                self._serve_queue.append(msg)   # the serving thread's
                continue
            note = self._seqs.accept(msg)
            if note is not None:
                self._queue.append(note)
                if note.method == "session_closed":
                    self._forget_serving(note.session_id)

    # -------------------------------------------------------- requests

    def send_request(self, method: str,
                     params: Optional[Mapping[str, Any]] = None) -> int:
        """Send a request without waiting; returns its id for
        ``wait_response``."""
        with self._cond:
            if self._sock is None or self._broken is not None:
                raise ConnectionLost(
                    "not connected to %s (%s)"
                    % (self.path, self._broken or "closed"))
            self._next_id += 1
            rid = self._next_id
            sock = self._sock
            self._req_gen[rid] = self._gen
        line = _request_line(rid, method, params)
        try:
            with self._wlock:
                sock.settimeout(None)
                sock.sendall(line)
        except OSError as e:
            with self._cond:
                if self._sock is sock and self._broken is None:
                    self._broken = ConnectionLost(
                        "connection to %s lost: %s" % (self.path, e))
                self._cond.notify_all()
            raise ConnectionLost("connection to %s lost: %s"
                                 % (self.path, e)) from e
        return rid

    def wait_response(self, request_id: int,
                      timeout: Optional[float] = None) -> Any:
        """The result of the request ``request_id``; raises StexecError
        for an error answer, TimeoutError, ConnectionLost."""
        def ready() -> bool:
            return (request_id in self._responses or
                    self._req_gen.get(request_id) != self._gen)
        try:
            self._pump(ready, _deadline(timeout))
        except TimeoutError:
            raise TimeoutError("no answer to request %d from stexecd at %s "
                               "within %s s" % (request_id, self.path,
                                                timeout)) from None
        with self._cond:
            msg = self._responses.pop(request_id, None)
            self._req_gen.pop(request_id, None)
        if msg is None:
            raise ConnectionLost("the connection to %s was replaced before "
                                 "request %d was answered"
                                 % (self.path, request_id))
        return _result_of(msg)

    def forget_response(self, request_id: int) -> None:
        """Nobody will wait for this request: drop its response."""
        with self._cond:
            gen = self._req_gen.pop(request_id, None)
            if (self._responses.pop(request_id, None) is None and
                    gen == self._gen):
                self._abandoned.add(request_id)

    def response_ready(self, request_id: int) -> bool:
        with self._cond:
            return request_id in self._responses

    def request(self, method: str,
                params: Optional[Mapping[str, Any]] = None,
                timeout: Optional[float] = None) -> Any:
        """Send a request and wait for its result (``timeout`` defaults to
        the client's). Notifications arriving meanwhile are queued."""
        rid = self.send_request(method, params)
        return self.wait_response(
            rid, self.timeout if timeout is None else timeout)

    def call(self, method: str, **params: Any) -> Any:
        """``call("addTool", sessionId=s, toolUse={...})``: wire names, as
        in PROTOCOL.md. Returns ``result``; raises StexecError."""
        return self.request(method, params)

    # -------------------------------------------------------- notifications

    def next_notification(self, timeout: Optional[float] = None,
                          session_id: Optional[str] = None
                          ) -> Optional[Notification]:
        """The oldest queued notification (of ``session_id`` if given),
        waiting up to ``timeout`` seconds (None: for ever, 0: only what has
        arrived); None on timeout. Queued notifications are returned even
        after the connection broke; then ConnectionLost."""
        def ready() -> bool:
            return any(session_id is None or n.session_id == session_id
                       for n in self._queue)
        try:
            self._pump(ready, _deadline(timeout))
        except TimeoutError:
            return None
        with self._cond:
            return _take(self._queue, session_id)

    def notifications(self, timeout: Optional[float] = None,
                      session_id: Optional[str] = None
                      ) -> Iterator[Notification]:
        """Yield notifications as they arrive. Stops after ``timeout``
        seconds without one (None: never stops on its own)."""
        while True:
            note = self.next_notification(timeout, session_id)
            if note is None:
                return
            yield note

    # -------------------------------------------------------- methods

    def initialize(self, name: str = "stexec.py",
                   version: str = "0.1.0") -> Dict[str, Any]:
        """Learn the server's version and limits (optional)."""
        return _check_version(self.call(
            "initialize", client={"name": name, "version": version}))

    def create_session(self, tools: Optional[List[Dict[str, Any]]] = None,
                       max_parallel: Optional[int] = None,
                       cwd: Optional[str] = None,
                       env: Optional[Mapping[str, Optional[str]]] = None,
                       sandbox: Any = None,
                       shell: Optional[Mapping[str, Any]] = None) -> str:
        """Create a session; returns its id. ``tools``: ToolDefs added to
        the daemon's; ``env``: on top of the daemon's, None unsets;
        ``sandbox``: the profile of its tools that have none
        ("read-only", "workspace-write", "none" or {mode, writableRoots,
        network}); ``network`` is True, False or rules {"allow": [RULE],
        "deny": [RULE]} (PROTOCOL.md §7.2): the hosts its tools that give
        no network of their own reach through the daemon's proxy;
        ``shell``: {keepCwd, keepEnv, envFile}, how the built-in bash
        keeps its cwd and env from call to call."""
        sid = self.request("createSession", _session_params(
            tools, max_parallel, cwd, env, sandbox, shell))["sessionId"]
        with self._cond:
            self._seqs.created(sid)
        return sid

    def close_session(self, session_id: str) -> None:
        """Close a session; returns once its tools' processes are dead."""
        self.request("closeSession", {"sessionId": session_id})
        with self._cond:
            self._seqs.subscribed.discard(session_id)
            self._forget_serving(session_id)

    # ------------------ client-run tools (PROTOCOL.md §4, Client-run tools)

    def session(self, session_id: str) -> Session:
        """A view of one session: ``c.session(sid).serve({...})``."""
        return Session(self, session_id)

    def serve(self, session_id: str,
              handlers: Mapping[str, Callable[..., Any]],
              take_over: bool = False,
              on_error: Optional[Callable[..., Any]] = None) -> List[str]:
        """(extension) Run the session's client-run tools (ToolDefs with
        ``"runner": "client"``) of these names in this client; returns the
        names claimed (serveTools).

        For each tool_start, ``handlers[name](input, call)`` runs in a
        thread of its own; ``call`` is a ToolCall (``cancelled``, a
        threading.Event set on tool_cancel; ``progress(data)``;
        ``tool_use_id``, ``resumed``...). What it returns (a string, a list
        of content blocks, or ``{"content": ..., "isError": bool}``) is
        sent with completeTool; an exception it raises is an error result
        with its message. A thread of the client reads the connection from
        now on, so calls start while the caller does something else.
        ``reconnect()`` claims the names again. A name another connection
        serves is refused (StexecError -32005) unless ``take_over``.
        ``on_error(err, call)`` is told when a result could not be handed
        back (completeTool refused, but not after tool_cancel)."""
        with self._cond:
            before = self._serving.register(session_id, handlers, on_error)
            if self._serve_thread is None:
                self._serve_thread = threading.Thread(
                    target=self._serve_loop, name="stexec-serve",
                    daemon=True)
                self._serve_thread.start()
        params: Dict[str, Any] = {"sessionId": session_id,
                                  "names": sorted(handlers)}
        if take_over:
            params["takeOver"] = True
        try:
            return self.request("serveTools", params)["names"]
        except StexecError:
            with self._cond:
                self._serving.undo(session_id, before)
            raise

    def served_names(self, session_id: str) -> List[str]:
        """(extension) The names this client serves in the session."""
        with self._cond:
            return sorted(self._serving.handlers.get(session_id, {}))

    def tool_progress(self, session_id: str, tool_use_id: str,
                      progress: Any) -> None:
        """(extension) Progress of a client-run tool this connection runs
        (a handler's ``call.progress`` sends it)."""
        self.request("toolProgress", {"sessionId": session_id,
                                      "toolUseId": tool_use_id,
                                      "progress": progress})

    def complete_tool(self, session_id: str, tool_use_id: str,
                      content: Content, is_error: bool = False) -> None:
        """(extension) The result of a client-run tool (``serve`` sends it
        from the handler's return value)."""
        params: Dict[str, Any] = {"sessionId": session_id,
                                  "toolUseId": tool_use_id,
                                  "content": content}
        if is_error:
            params["isError"] = True
        self.request("completeTool", params)

    def _forget_serving(self, session_id: Optional[str]) -> None:
        """(lock held) The session is gone: cancel its calls here."""
        if session_id is None:
            return
        for call in self._serving.forget(session_id):
            if call.ctx is not None:
                call.ctx.cancelled.set()

    def _serve_loop(self) -> None:
        """The serving thread: reads the connection whenever no other
        thread does, and starts a thread per tool_start."""
        while True:
            try:
                self._pump(lambda: bool(self._serve_queue), None)
            except ConnectionLost:
                with self._cond:
                    gen = self._gen
                    # Until reconnect(), unless something is left to handle.
                    while self._gen == gen and not self._serve_queue:
                        self._cond.wait()
            while True:
                with self._cond:
                    if not self._serve_queue:
                        break
                    msg = self._serve_queue.popleft()
                    params = msg.get("params")
                    if not isinstance(params, dict):
                        continue
                    if msg["method"] == "tool_cancel":
                        call = self._serving.cancel(params)
                        if call is not None and call.ctx is not None:
                            call.ctx.cancelled.set()
                        continue
                    action, call, handler = self._serving.start(params)
                    if call is not None and action == "run":
                        call.ctx = self._tool_call(call.session_id, params)
                if action == "run":
                    target, args = self._run_call, (call, handler)
                elif action in ("send", "missing"):
                    target, args = self._complete, (call,)
                else:
                    continue
                threading.Thread(target=target, args=args, daemon=True,
                                 name="stexec-tool-" + call.tool_use_id
                                 ).start()

    def _tool_call(self, session_id: str,
                   params: Mapping[str, Any]) -> ToolCall:
        tid = params["toolUseId"]
        return ToolCall(session_id, params, threading.Event(),
                        lambda data: self.tool_progress(session_id, tid,
                                                        data))

    def _run_call(self, call: _Call, handler: Callable[..., Any]) -> None:
        ctx = call.ctx
        assert ctx is not None
        try:
            params = _outcome_params(call.session_id, call.tool_use_id,
                                     handler(ctx.input, ctx))
        except BaseException as e:   # any failure is the tool's result
            params = _error_params(call.session_id, call.tool_use_id, e)
        with self._cond:
            if self._serving.calls.get((call.session_id,
                                        call.tool_use_id)) is not call:
                return               # its session is gone
            call.outcome = params
        self._complete(call)

    def _complete(self, call: _Call) -> None:
        with self._cond:
            if call.sending or call.outcome is None or self._serving.held:
                return
            call.sending = True
        err: Optional[BaseException] = None
        try:
            self.request("completeTool", call.outcome)
        except (StexecError, ConnectionLost, TimeoutError, OSError) as e:
            err = e
        with self._cond:
            tell = self._serving.sent(call, err)
        if tell is not None:
            tell(err, call)

    def list_sessions(self) -> List[Dict[str, Any]]:
        """[{sessionId, turn, unfinished}] of this user."""
        return self.request("listSessions", {})["sessions"]

    def list_tools(self, session_id: Optional[str] = None
                   ) -> List[Dict[str, Any]]:
        """The daemon's ToolDefs, or a session's."""
        return self.request("listTools",
                            _params({}, sessionId=session_id))["tools"]

    def add_tool(self, session_id: str, id: str, name: str,
                 input: Optional[Mapping[str, Any]] = None) -> AddToolResult:
        """Hand one tool_use block to the session's current turn."""
        return self.request("addTool",
                            _tool_use_params(session_id, id, name, input))

    def abort(self, session_id: str, reason: str = "interrupt") -> int:
        """Abort the current turn ("interrupt": like Esc; "cancel": kill
        everything). Returns the turn; you still drain it."""
        return self.request("abort", {"sessionId": session_id,
                                      "reason": reason})["turn"]

    def discard(self, session_id: str) -> DiscardResult:
        """Throw the current turn away; nothing more of it is delivered."""
        return self.request("discard", {"sessionId": session_id})

    def drain(self, session_id: str,
              timeout: Optional[float] = None) -> DrainResult:
        """End the turn: returns after its last tool_result and turn_end
        (which are then queued, if subscribed). ``Turn.finish`` does the
        same while yielding progress."""
        return self.request("drain", {"sessionId": session_id}, timeout)

    def respond_permission(self, session_id: str, tool_use_id: str,
                           decision: str, message: Optional[str] = None
                           ) -> None:
        """Answer a permission_request: decision "allow" or "deny"."""
        self.request("respondPermission", _params(
            {"sessionId": session_id, "toolUseId": tool_use_id,
             "decision": decision}, message=message))

    def subscribe(self, session_id: str, since: Optional[int] = None) -> int:
        """Receive the session's notifications on this connection; returns
        the session's last seq. ``since``: replay every retained
        notification after it first. Default: from the last notification
        this client received of the session (or of a session it created),
        else only live ones. Notifications already received are dropped
        when replayed again."""
        with self._cond:
            since = self._seqs.since(session_id, since)
        last = self.request("subscribe", _params(
            {"sessionId": session_id}, since=since))["lastSeq"]
        with self._cond:
            self._seqs.subscribed_at(session_id, since, last)
        return last

    def unsubscribe(self, session_id: str) -> None:
        self.request("unsubscribe", {"sessionId": session_id})
        with self._cond:
            self._seqs.subscribed.discard(session_id)

    def events(self, session_id: str, since: Optional[int] = None,
               max: Optional[int] = None) -> Dict[str, Any]:
        """Pull instead of push: {notifications: [raw objects], lastSeq}."""
        return self.request("events", _params(
            {"sessionId": session_id}, since=since, max=max))

    def status(self, session_id: str) -> Dict[str, Any]:
        """{turn, interruptible, tools: [{id, name, status, ...}]}."""
        return self.request("status", {"sessionId": session_id})

    def ping(self) -> None:
        self.request("ping", {})

    def stats(self) -> Dict[str, Any]:
        return self.request("stats", {})

    def metrics(self) -> Dict[str, Any]:
        """(extension) {metrics: [family]} (PROTOCOL.md, metrics)."""
        return self.request("metrics", {})

    # ---------------------------------------- jobs (PROTOCOL.md §4, Jobs)

    def list_jobs(self, session_id: str) -> List[Dict[str, Any]]:
        """(extension) The session's jobs: [{jobId, toolUseId, name,
        command, pid, status, startedAt, exitCode, signal, reason,
        outputBytes, tty}]."""
        return self.request("listJobs", {"sessionId": session_id})["jobs"]

    def read_job(self, session_id: str, job_id: str,
                 since: Optional[int] = None,
                 max_bytes: Optional[int] = None,
                 wait_ms: Optional[int] = None,
                 filter: Optional[str] = None) -> Dict[str, Any]:
        """(extension) {text, offset, next, dropped, status, exitCode,
        signal}: the job's output from ``since`` (default: where this
        session's last read without ``since`` stopped); ``wait_ms``: wait
        that long for output or the end when nothing is new."""
        return self.request("readJob", _read_job_params(
            session_id, job_id, since, max_bytes, wait_ms, filter),
            _wait_timeout(self.timeout, wait_ms))

    def write_job(self, session_id: str, job_id: str, data: str,
                  eof: bool = False) -> int:
        """(extension) Bytes for the job's stdin, in order; ``eof`` closes
        it after them. Returns how many bytes were queued."""
        return self.request("writeJob", _write_params(
            {"sessionId": session_id, "jobId": job_id}, data, eof)
        )["written"]

    def signal_job(self, session_id: str, job_id: str,
                   signal: str = "terminate") -> None:
        """(extension) "interrupt" (SIGINT), "terminate" (TERM, then KILL
        after the grace) or "kill"."""
        self.request("signalJob", {"sessionId": session_id, "jobId": job_id,
                                   "signal": signal})

    def resize_job(self, session_id: str, job_id: str, cols: int,
                   rows: int) -> None:
        """(extension) The size of the job's terminal."""
        self.request("resizeJob", {"sessionId": session_id, "jobId": job_id,
                                   "cols": cols, "rows": rows})

    def write_stdin(self, session_id: str, tool_use_id: str, data: str,
                    eof: bool = False) -> int:
        """(extension) Input for a running tool of the current turn whose
        ToolDef has ``stdin: "stream"``."""
        return self.request("writeStdin", _write_params(
            {"sessionId": session_id, "toolUseId": tool_use_id}, data, eof)
        )["written"]

    def job_output(self, session_id: str, job_id: str, since: int = 0,
                   filter: Optional[str] = None, wait_ms: int = 30000,
                   max_bytes: Optional[int] = None) -> "JobOutput":
        """(extension) Iterate over the job's output as it comes: each
        chunk of text, until the job has ended and all is read (see
        JobOutput)."""
        return JobOutput(self, session_id, job_id, since, filter, wait_ms,
                         max_bytes)


# ---------------------------------------------------------------- jobs

def _read_job_params(session_id: str, job_id: str, since: Optional[int],
                     max_bytes: Optional[int], wait_ms: Optional[int],
                     filter: Optional[str]) -> Dict[str, Any]:
    return _params({"sessionId": session_id, "jobId": job_id}, since=since,
                   maxBytes=max_bytes, waitMs=wait_ms, filter=filter)


def _write_params(ids: Dict[str, Any], data: str,
                  eof: bool) -> Dict[str, Any]:
    params = dict(ids, data=data)
    if eof:
        params["eof"] = True
    return params


def _wait_timeout(timeout: Optional[float],
                  wait_ms: Optional[int]) -> Optional[float]:
    """A request's timeout that outlasts the daemon's long poll."""
    if timeout is None or not wait_ms:
        return timeout
    return max(timeout, wait_ms / 1000.0 + 5.0)


def job_of(meta: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``{jobId, pid}`` a tool_result's meta names when the call became
    a job (``reason`` "background"), else None."""
    job = meta.get("job")
    if meta.get("reason") != "background" or not isinstance(job, dict):
        return None
    return job


class _JobCursor:
    """Where a job's output iterator is: reads name their offset, so they
    leave the session's own read position (bash_output's) alone."""

    def __init__(self, session_id: str, job_id: str, since: int,
                 filter: Optional[str], wait_ms: int,
                 max_bytes: Optional[int]):
        self.session_id = session_id
        self.job_id = job_id
        self.since = since
        self.filter = filter
        self.wait_ms = wait_ms
        self.max_bytes = max_bytes
        self.done = False
        self.last: Optional[Dict[str, Any]] = None   # the last readJob result

    def params(self) -> Dict[str, Any]:
        return _read_job_params(self.session_id, self.job_id, self.since,
                                self.max_bytes, self.wait_ms, self.filter)

    def advance(self, res: Dict[str, Any]) -> bool:
        """Take a readJob result; True when it consumed nothing though the
        job runs (a filter holding back a partial line): pause a little
        before the next read rather than spin."""
        self.last = res
        moved = res["next"] != self.since
        self.since = res["next"]
        if res["status"] != "running" and not moved:
            self.done = True
        return not moved and not self.done

    @property
    def pause(self) -> float:
        return min(self.wait_ms, 100) / 1000.0


class JobOutput(_JobCursor):
    """Iterates over a job's output as it comes, long-polling readJob from
    ``since`` (default 0: all the job's ring still holds): each non-empty
    chunk of text, until the job has ended and everything is read. Output
    the ring dropped before it was read is skipped. ``last`` is the last
    readJob result ({status, exitCode, signal, next, ...}) once done."""

    def __init__(self, client: Client, session_id: str, job_id: str,
                 since: int = 0, filter: Optional[str] = None,
                 wait_ms: int = 30000, max_bytes: Optional[int] = None):
        super().__init__(session_id, job_id, since, filter, wait_ms,
                         max_bytes)
        self.client = client

    def __iter__(self) -> "JobOutput":
        return self

    def __next__(self) -> str:
        while not self.done:
            res = self.client.request(
                "readJob", self.params(),
                _wait_timeout(self.client.timeout, self.wait_ms))
            if self.advance(res):
                time.sleep(self.pause)
            if res["text"]:
                return res["text"]
        raise StopIteration


# ---------------------------------------------------------------- serving

SERVE_METHODS = ("tool_start", "tool_cancel")


class ToolCancelled(Exception):
    """tool_cancel came for the call: ``reason`` is its reason
    ("interrupt", "abort", "sibling_error", "discard", "timeout",
    "closed")."""

    def __init__(self, reason: str):
        super().__init__("cancelled (%s)" % reason)
        self.reason = reason


class ToolCall:
    """What a handler of a client-run tool is given besides the input.

    ``cancelled`` is set when tool_cancel comes (``cancel_reason`` says
    why): a ``threading.Event`` for a handler that runs in a thread, an
    ``asyncio.Event`` for a coroutine. ``progress(data)`` sends a progress
    notification for the call (awaited in a coroutine). ``resumed``: the
    call was started before on a connection that has closed since, so it
    may have run once already."""

    def __init__(self, session_id: str, params: Mapping[str, Any],
                 cancelled: Any, progress: Callable[[Any], Any]):
        self.session_id = session_id
        self.tool_use_id: str = params["toolUseId"]
        self.turn: int = params["turn"]
        self.name: str = params["name"]
        inp = params.get("input")
        self.input: Dict[str, Any] = inp if isinstance(inp, dict) else {}
        self.resumed: bool = params.get("resumed") is True
        self.cancelled = cancelled
        self.cancel_reason: Optional[str] = None
        self.progress = progress

    def __repr__(self) -> str:
        return "ToolCall(%s %s turn %d%s)" % (
            self.name, self.tool_use_id, self.turn,
            ", cancelled: %s" % self.cancel_reason if self.cancel_reason
            else "")


def _outcome_params(session_id: str, tool_use_id: str,
                    out: Any) -> Dict[str, Any]:
    """completeTool params from a handler's return value: a string, a list
    of content blocks, or a mapping {content, isError}; None is empty
    content, anything else its JSON text."""
    params: Dict[str, Any] = {"sessionId": session_id,
                              "toolUseId": tool_use_id}
    if out is None:
        params["content"] = ""
    elif isinstance(out, (str, list)):
        params["content"] = out
    elif isinstance(out, Mapping) and "content" in out:
        params["content"] = out["content"] if out["content"] is not None \
            else ""
        if out.get("isError"):
            params["isError"] = True
    else:
        params["content"] = json.dumps(out, ensure_ascii=False)
    return params


def _error_params(session_id: str, tool_use_id: str,
                  exc: BaseException) -> Dict[str, Any]:
    """completeTool params for a handler that raised: an error result with
    the exception's message."""
    text = str(exc) or type(exc).__name__
    return {"sessionId": session_id, "toolUseId": tool_use_id,
            "content": text, "isError": True}


class _Call:
    """One call of a client-run tool in this client: running, or done and
    waiting for the daemon to take its result."""

    def __init__(self, session_id: str, params: Mapping[str, Any],
                 on_error: Optional[Callable[..., Any]]):
        self.session_id = session_id
        self.tool_use_id: str = params["toolUseId"]
        self.turn: int = params["turn"]
        self.name: str = params["name"]
        self.on_error = on_error
        self.ctx: Optional[ToolCall] = None
        self.outcome: Optional[Dict[str, Any]] = None
        self.sending = False
        self.worker: Any = None        # the thread or task running it
        self.cancels_task = False      # tool_cancel cancels the task
        self.again = False             # sent on a connection that broke
        self.taken = False             # the daemon took its result


class _Serving:
    """The handlers a client serves, by session, and its calls in flight;
    the bookkeeping shared by the blocking and the asyncio client (callers
    hold whatever lock their flavour needs)."""

    def __init__(self) -> None:
        self.handlers: Dict[str, Dict[str, Callable[..., Any]]] = {}
        self.on_error: Dict[str, Optional[Callable[..., Any]]] = {}
        self.calls: Dict[Tuple[str, str], _Call] = {}
        # While a reconnect claims the names again, results wait: the
        # daemon takes a result only on the connection its call was
        # started on.
        self.held = False

    def release(self) -> List[_Call]:
        """The claims are made again: the calls whose results wait."""
        self.held = False
        return [c for c in self.calls.values()
                if c.outcome is not None and not c.sending and not c.taken]

    def register(self, session_id: str,
                 handlers: Mapping[str, Callable[..., Any]],
                 on_error: Optional[Callable[..., Any]]) -> Any:
        """Add handlers; returns what ``undo`` needs to take them back."""
        if not handlers:
            raise ValueError("serve: no handlers")
        for name, fn in handlers.items():
            if not callable(fn):
                raise TypeError("serve: the handler of %s is not callable"
                                % name)
        before = (dict(self.handlers[session_id])
                  if session_id in self.handlers else None,
                  self.on_error.get(session_id))
        self.handlers.setdefault(session_id, {}).update(handlers)
        if on_error is not None or session_id not in self.on_error:
            self.on_error[session_id] = on_error
        return before

    def undo(self, session_id: str, before: Any) -> None:
        handlers, on_error = before
        if handlers is None:
            self.handlers.pop(session_id, None)
            self.on_error.pop(session_id, None)
        else:
            self.handlers[session_id] = handlers
            self.on_error[session_id] = on_error

    def claims(self) -> List[Tuple[str, List[str]]]:
        return [(sid, sorted(h)) for sid, h in sorted(self.handlers.items())]

    def start(self, params: Mapping[str, Any]
              ) -> Tuple[str, Optional[_Call], Any]:
        """What to do with a tool_start: ("run", call, handler), ("send",
        call, None) for a done call whose result the daemon has not taken,
        ("missing", call, None) without a handler, ("ignore", ...)."""
        sid, tid = params.get("sessionId"), params.get("toolUseId")
        if not isinstance(sid, str) or not isinstance(tid, str) or \
                not isinstance(params.get("name"), str) or \
                not isinstance(params.get("turn"), int):
            return "ignore", None, None
        old = self.calls.get((sid, tid))
        if old is not None and old.turn == params["turn"]:
            if old.outcome is not None and not old.sending and \
                    not old.taken:
                return "send", old, None
            # Running, or done: a tool_start sent again on a claim (after
            # a reconnect) may be read after its result was taken.
            return "ignore", old, None
        # A later turn: the results taken before it are not asked again.
        for key in [k for k, c in self.calls.items() if k[0] == sid and
                    c.taken and c.turn < params["turn"]]:
            del self.calls[key]
        call = _Call(sid, params, self.on_error.get(sid))
        self.calls[(sid, tid)] = call
        handler = self.handlers.get(sid, {}).get(params["name"])
        if handler is None:
            call.outcome = {"sessionId": sid, "toolUseId": tid,
                            "content": "this client has no handler for %s"
                            % params["name"], "isError": True}
            return "missing", call, None
        return "run", call, handler

    def cancel(self, params: Mapping[str, Any]) -> Optional[_Call]:
        """The running call a tool_cancel names, with its reason set."""
        call = self.calls.get((params.get("sessionId"),
                               params.get("toolUseId")))
        if call is None or call.ctx is None or call.ctx.cancel_reason:
            return None
        call.ctx.cancel_reason = str(params.get("reason") or "abort")
        return call

    def forget(self, session_id: str) -> List[_Call]:
        """The session is gone: its calls (to cancel) and handlers go."""
        self.handlers.pop(session_id, None)
        self.on_error.pop(session_id, None)
        gone = [c for k, c in self.calls.items() if k[0] == session_id]
        for c in gone:
            del self.calls[(c.session_id, c.tool_use_id)]
            if c.ctx is not None and not c.ctx.cancel_reason:
                c.ctx.cancel_reason = "closed"
        return gone

    def sent(self, call: _Call, err: Optional[BaseException]
             ) -> Optional[Callable[..., Any]]:
        """completeTool answered (err None) or failed; returns the on_error
        callback to tell, if any."""
        call.sending = False
        if isinstance(err, ConnectionLost):
            call.again = True
            return None     # kept: the claim after a reconnect sends it
        if err is None:
            call.taken = True   # kept until a later turn (start)
            return None
        key = (call.session_id, call.tool_use_id)
        if self.calls.get(key) is call:
            del self.calls[key]
        # A refusal after tool_cancel is expected (the result is
        # delivered), and so is one of a result sent again (it had arrived).
        if isinstance(err, StexecError) and err.code == STATE_CONFLICT and \
                (call.again or (call.ctx is not None and
                                call.ctx.cancel_reason)):
            return None
        return call.on_error


class Session:
    """One session of a client (``client.session(sid)``): its id, and
    ``serve`` for the tools this client runs."""

    def __init__(self, client: Any, session_id: str):
        self.client = client
        self.id = session_id

    def serve(self, handlers: Mapping[str, Callable[..., Any]],
              take_over: bool = False,
              on_error: Optional[Callable[..., Any]] = None) -> Any:
        """``client.serve(self.id, ...)`` (awaitable with stexec.aio)."""
        return self.client.serve(self.id, handlers, take_over=take_over,
                                 on_error=on_error)

    @property
    def served_names(self) -> List[str]:
        return self.client.served_names(self.id)

    def __repr__(self) -> str:
        return "Session(%s)" % self.id


# ---------------------------------------------------------------- turn

class _TurnState:
    """What a turn has seen: the ids in add order, the results by id, the
    drain; shared by the blocking and the asyncio Turn."""

    def __init__(self, client: Any, session_id: str):
        self.client = client
        self.session_id = session_id
        self.number: Optional[int] = None     # learned from addTool / drain
        self.ids: List[str] = []
        self.meta: Dict[str, Dict[str, Any]] = {}
        self._results: Dict[str, Dict[str, Any]] = {}
        self.drained: Optional[DrainResult] = None
        self.ended: Optional[str] = None       # turn_end reason

    def _added(self, id: str, res: AddToolResult) -> AddToolResult:
        self.ids.append(id)
        if self.number is None:
            self.number = res["turn"]
        return res

    def _see(self, note: Notification) -> None:
        if note.method == "tool_result" and (
                self.number is None or note.turn == self.number):
            self._results[note.tool_use_id] = note.params["result"]
            self.meta[note.tool_use_id] = note.params.get("meta", {})
        elif note.method == "turn_end" and (
                self.number is None or note.turn == self.number):
            self.ended = note.params.get("reason")

    def _drain_done(self, res: DrainResult) -> None:
        self.drained = res
        self.number = res["turn"]

    @property
    def results(self) -> List[Dict[str, Any]]:
        """tool_result blocks received so far, in add order (all of them
        once ``finish()`` is done)."""
        out = []
        for i in self.ids:
            if i not in self._results:
                break
            out.append(self._results[i])
        return out


class Turn(_TurnState):
    """The frontend pattern for one LLM call.

    While the model's message streams in, ``add`` each tool_use block the
    moment it is parsed, and now and then ``poll()`` to show progress. When
    the message is complete, iterate ``finish()``: it drains the turn and
    yields every notification of the session (progress, tool_status,
    state, tool_result, permission_request, turn_end) as it arrives.
    Afterwards ``results`` holds the tool_result blocks in add order, ready
    for the next model request, and ``meta`` the daemon's details per id.

    A ``permission_request`` must be answered (``client.respond_permission``)
    while iterating, or the turn waits for ever.
    """

    def __init__(self, client: Client, session_id: str):
        super().__init__(client, session_id)
        if session_id not in client._seqs.subscribed:
            client.subscribe(session_id)

    def add(self, id: str, name: str,
            input: Optional[Mapping[str, Any]] = None) -> AddToolResult:
        """Add one tool (start it as early as safety allows)."""
        return self._added(id, self.client.add_tool(self.session_id, id,
                                                    name, input))

    def add_block(self, block: Mapping[str, Any]) -> AddToolResult:
        """Add a model tool_use block ({type, id, name, input})."""
        return self.add(block["id"], block["name"], block.get("input"))

    def poll(self, timeout: float = 0.0) -> Iterator[Notification]:
        """Yield what has arrived for this session, waiting at most
        ``timeout`` seconds for the first one."""
        while True:
            note = self.client.next_notification(timeout, self.session_id)
            if note is None:
                return
            self._see(note)
            yield note
            timeout = 0.0

    def interrupt(self, reason: str = "interrupt") -> None:
        """The user pressed Esc ("interrupt") or wants everything killed
        ("cancel"). Safe to call from another thread."""
        self.client.abort(self.session_id, reason)

    def finish(self, timeout: Optional[float] = None
               ) -> Iterator[Notification]:
        """Drain: yield notifications until the turn's last tool_result and
        turn_end have arrived and the drain is answered. TimeoutError after
        ``timeout`` seconds in all."""
        c = self.client
        sid = self.session_id
        deadline = _deadline(timeout)
        rid = c.send_request("drain", {"sessionId": sid})
        answered = False

        def ready() -> bool:
            return (any(n.session_id == sid for n in c._queue) or
                    rid in c._responses or c._req_gen.get(rid) != c._gen)
        try:
            while True:
                c._pump(ready, deadline)
                with c._cond:
                    note = _take(c._queue, sid)
                if note is not None:
                    self._see(note)
                    yield note
                    continue
                # The drain response comes after turn_end (PROTOCOL.md §3.5),
                # so everything of the turn has been yielded by now.
                answered = True
                self._drain_done(c.wait_response(rid, 0))
                return
        finally:
            if not answered:
                c.forget_response(rid)

    def run(self, tool_uses: List[Mapping[str, Any]],
            on_notification: Optional[Callable[[Notification], None]] = None
            ) -> List[Dict[str, Any]]:
        """Add every tool_use block, drain, return the results in order."""
        for block in tool_uses:
            self.add_block(block)
        for note in self.finish():
            if on_notification is not None:
                on_notification(note)
        return self.results
