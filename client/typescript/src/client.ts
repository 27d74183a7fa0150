// One connection to stexecd: JSON-RPC 2.0 requests matched to responses by
// id, notifications queued per session and handed out by async iterators,
// and resume after a reconnect by the seq of the last one received.
import type * as net from "node:net";
import {
  ConnectionLostError,
  ProtocolError,
  StexecError,
} from "./errors.js";
import type {
  AbortResult,
  AddToolResult,
  ClientInfo,
  CreateSessionParams,
  CreateSessionResult,
  DiscardResult,
  DrainResult,
  EventsResult,
  InitializeResult,
  ListSessionsResult,
  ListToolsResult,
  Methods,
  Notification,
  StatsResult,
  StatusResult,
  ServeNotification,
  ServeNotificationParamsMap,
  SubscribeResult,
  ToolResultContent,
  ToolUse,
} from "./protocol.js";
import type {
  ListJobsResult,
  ReadJobParams,
  ReadJobResult,
  WriteJobResult,
  WriteStdinResult,
} from "./protocol.js";
import type { JobOutputOptions, JobSignal } from "./jobs.js";
import type { ServeOptions, ServePort, ToolHandlers } from "./serve.js";
import { Serving } from "./serve.js";
import { connectSocket } from "./socket.js";

export type MethodName = keyof Methods;
export type Params<M extends MethodName> = Methods[M]["params"];
export type Result<M extends MethodName> = Methods[M]["result"];

export interface ClientOptions {
  /** The socket; default: the C client's rules (see defaultSocketPath). */
  path?: string;
}

interface Pending {
  method: string;
  resolve(result: unknown): void;
  reject(err: Error): void;
  // Runs as the response is read, before any later line, so state such as
  // a session's last seq is right for the notifications that follow.
  onResult?(result: unknown): void;
}

interface Waiter {
  sessionId: string | undefined;
  resolve(r: IteratorResult<Notification>): void;
  reject(err: Error): void;
}

interface Queued {
  note: Notification;
  arrival: number;
}

// A FIFO that takes from the front in O(1), compacting now and then.
class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }
  peek(): T | undefined {
    return this.items[this.head];
  }
  push(item: T): void {
    this.items.push(item);
  }
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

export class Client {
  private socketPath: string | undefined;
  private sock: net.Socket | undefined;
  private partial: Buffer[] = [];
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly lastSeqs = new Map<string, number>();
  private readonly subscribed = new Set<string>();
  private readonly queues = new Map<string, Fifo<Queued>>();
  // Sessions whose notifications are kept for notifications() (all: queueAll).
  private readonly queued = new Set<string>();
  private queueAll = false;
  private readonly waiters = new Set<Waiter>();
  private readonly listeners = new Set<(note: Notification) => void>();
  private arrivals = 0;
  private broken: Error | undefined = new ConnectionLostError("not connected");
  private closedByUser = false;
  // Client-run tools this client serves, and their calls in flight.
  private readonly serving = new Serving(this as unknown as ServePort);
  private readonly serveListeners = new Set<(note: ServeNotification) => void>();

  private constructor(options: ClientOptions) {
    this.socketPath = options.path;
  }

  /** The socket this client connects (and reconnects) to; undefined before the first connect by default. */
  get path(): string | undefined {
    return this.socketPath;
  }

  /** Connect; `path` or options.path names the socket, else the defaults. */
  static async connect(options: string | ClientOptions = {}): Promise<Client> {
    const c = new Client(typeof options === "string" ? { path: options } : options);
    await c.open();
    return c;
  }

  private async open(): Promise<void> {
    const { socket, path } = await connectSocket(this.socketPath);
    // Reconnects go where the first connect went (the /run fallback too).
    this.socketPath = path;
    this.sock = socket;
    this.partial = [];
    this.broken = undefined;
    this.closedByUser = false;
    socket.on("data", (chunk: Buffer) => this.onData(socket, chunk));
    socket.on("error", (err) => this.fail(socket, new ConnectionLostError(`connection to stexecd lost: ${err.message}`)));
    socket.on("close", () => this.fail(socket, new ConnectionLostError()));
  }

  /** Is the connection up? */
  get connected(): boolean {
    return this.broken === undefined;
  }

  /**
   * Close the connection. Sessions live on in the daemon (their tools keep
   * running); reconnect() resumes. Pending requests fail with
   * ConnectionLostError; notification iterators end once their queue is empty.
   */
  close(): void {
    this.closedByUser = true;
    if (this.sock !== undefined) this.fail(this.sock, new ConnectionLostError("connection closed"));
  }

  /**
   * Open a new connection and resubscribe every session this client was
   * subscribed to from the last seq it received: nothing is missed, and
   * replayed notifications it already has are dropped. Throws the first
   * error of a resubscribe after trying them all: a ReplayGapError means the
   * daemon no longer holds what was missed (PROTOCOL.md §2), and that
   * session is no longer subscribed; an UnknownSessionError, that it closed.
   */
  async reconnect(): Promise<void> {
    if (this.sock !== undefined) {
      this.closedByUser = false;
      this.fail(this.sock, new ConnectionLostError("reconnecting"));
    }
    this.serving.hold();
    try {
      await this.open();
    } catch (err) {
      this.serving.release();
      throw err;
    }
    const sessions = [...this.subscribed];
    this.subscribed.clear();
    let first: unknown;
    for (const [i, sid] of sessions.entries()) {
      try {
        await this.resubscribe(sid, this.lastSeqs.get(sid) ?? 0);
      } catch (err) {
        if (err instanceof ConnectionLostError) {
          // Broken again: the next reconnect() does the rest.
          for (const rest of sessions.slice(i)) this.subscribed.add(rest);
          throw err;
        }
        first ??= err;
      }
    }
    // Claim the served names again. takeOver: the daemon may not have seen
    // the old connection close yet, and its claims are this client's.
    try {
      for (const [sid, names] of this.serving.served()) {
        try {
          await this.send("serveTools", { sessionId: sid, names, takeOver: true });
        } catch (err) {
          if (err instanceof ConnectionLostError) throw err;
          first ??= err;
        }
      }
    } finally {
      this.serving.release();
    }
    if (first !== undefined) throw first;
  }

  /** The seq of the newest notification received for the session (0: none). */
  lastSeq(sessionId: string): number {
    return this.lastSeqs.get(sessionId) ?? 0;
  }

  // ------------------------------------------------------------ reading

  private onData(sock: net.Socket, chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1 && this.sock === sock; nl = chunk.indexOf(10, start)) {
      this.partial.push(chunk.subarray(start, nl));
      const line = this.partial.length === 1 ? this.partial[0]! : Buffer.concat(this.partial);
      this.partial = [];
      start = nl + 1;
      this.onLine(sock, line);
    }
    if (start < chunk.length && this.sock === sock) this.partial.push(chunk.subarray(start));
  }

  private onLine(sock: net.Socket, line: Buffer): void {
    const text = line.toString("utf8").trim();
    if (text === "") return;
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(text) as Record<string, unknown>;
    } catch {
      this.fail(sock, new ProtocolError(`stexecd sent a line that is not JSON: ${text.slice(0, 200)}`));
      return;
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
      this.fail(sock, new ProtocolError(`stexecd sent a line that is not a JSON object: ${text.slice(0, 200)}`));
      return;
    }
    if ("id" in msg && ("result" in msg || "error" in msg)) this.onResponse(msg);
    else if (msg.method === "tool_start" || msg.method === "tool_cancel") this.onServe(msg);
    else if (typeof msg.method === "string") this.deliver(msg as unknown as Notification);
  }

  private onResponse(msg: Record<string, unknown>): void {
    // id null: a line of ours the daemon could not read; nothing waits for it.
    if (typeof msg.id !== "number") return;
    const p = this.pending.get(msg.id);
    if (p === undefined) return;
    this.pending.delete(msg.id);
    if ("error" in msg) {
      const e = msg.error as { code?: unknown; message?: unknown; data?: unknown };
      p.reject(
        typeof e?.code === "number" && typeof e.message === "string"
          ? StexecError.from({ code: e.code, message: e.message, data: e.data }, p.method)
          : new ProtocolError(`stexecd sent a malformed error: ${JSON.stringify(e)}`),
      );
      return;
    }
    p.onResult?.(msg.result);
    p.resolve(msg.result);
  }

  // tool_start and tool_cancel go to this connection only, for the tools it serves.
  private onServe(msg: Record<string, unknown>): void {
    const p = msg.params as Record<string, unknown> | undefined;
    if (typeof p !== "object" || p === null || typeof p.sessionId !== "string" || typeof p.toolUseId !== "string") return;
    for (const fn of [...this.serveListeners]) {
      try {
        fn(msg as unknown as ServeNotification);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
    if (msg.method === "tool_cancel") {
      this.serving.onCancel(p as unknown as ServeNotificationParamsMap["tool_cancel"]);
      return;
    }
    if (typeof p.name !== "string" || typeof p.turn !== "number") return;
    const input = typeof p.input === "object" && p.input !== null && !Array.isArray(p.input) ? p.input : {};
    this.serving.onStart(
      { ...(p as unknown as ServeNotificationParamsMap["tool_start"]), input: input as Record<string, unknown> },
      this.serveListeners.size > 0,
    );
  }

  private deliver(note: Notification): void {
    const sid = note.params?.sessionId;
    const seq = note.params?.seq;
    if (typeof sid !== "string" || typeof seq !== "number") return;
    // Replayed after a resubscribe: already received once.
    if (seq <= (this.lastSeqs.get(sid) ?? 0)) return;
    this.lastSeqs.set(sid, seq);
    if (note.method === "session_closed") {
      this.subscribed.delete(sid);
      this.serving.forget(sid);
    }
    for (const fn of [...this.listeners]) {
      try {
        fn(note);
      } catch (err) {
        // A listener's bug surfaces as it would from an EventEmitter, but
        // only after this line is handled: the stream stays consistent.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
    for (const w of this.waiters) {
      if (w.sessionId === undefined || w.sessionId === sid) {
        this.waiters.delete(w);
        w.resolve({ value: note, done: false });
        return;
      }
    }
    if (!this.queueAll && !this.queued.has(sid)) return;
    let q = this.queues.get(sid);
    if (q === undefined) this.queues.set(sid, (q = new Fifo()));
    q.push({ note, arrival: this.arrivals++ });
  }

  private fail(sock: net.Socket, err: Error): void {
    if (this.sock !== sock) return;
    this.sock = undefined;
    this.broken = err;
    sock.destroy();
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) p.reject(err);
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) {
      if (this.closedByUser) w.resolve({ value: undefined, done: true });
      else w.reject(err);
    }
  }

  // ------------------------------------------------------------ requests

  /**
   * Send any request and wait for its response: the result, or a
   * StexecError subclass for the error's code, or ConnectionLostError.
   */
  request<M extends MethodName>(method: M, params?: Params<M>): Promise<Result<M>> {
    return this.send(method, params);
  }

  private send<M extends MethodName>(
    method: M,
    params: Params<M> | undefined,
    onResult?: (result: Result<M>) => void,
  ): Promise<Result<M>> {
    if (this.sock === undefined || this.broken !== undefined)
      return Promise.reject(this.broken ?? new ConnectionLostError("not connected"));
    const id = this.nextId++;
    const msg: Record<string, unknown> = { jsonrpc: "2.0", id, method };
    if (params !== undefined) msg.params = params;
    const line = JSON.stringify(msg) + "\n";
    return new Promise<Result<M>>((resolve, reject) => {
      this.pending.set(id, {
        method,
        resolve: resolve as (r: unknown) => void,
        reject,
        ...(onResult ? { onResult: onResult as (r: unknown) => void } : {}),
      });
      this.sock!.write(line);
    });
  }

  /** Learn the daemon's version and limits (optional). */
  initialize(client: ClientInfo = { name: "stexec-ts", version: "0.1.0" }): Promise<InitializeResult> {
    return this.send("initialize", { client });
  }

  createSession(params: CreateSessionParams = {}): Promise<CreateSessionResult> {
    return this.send("createSession", params);
  }

  /** Close a session; its tools are killed, subscribers get session_closed first. */
  closeSession(sessionId: string): Promise<Result<"closeSession">> {
    return this.send("closeSession", { sessionId }, () => {
      this.subscribed.delete(sessionId);
      this.serving.forget(sessionId);
    });
  }

  listSessions(): Promise<ListSessionsResult> {
    return this.send("listSessions", {});
  }

  /** The daemon's tools, or with a session its tools (daemon + session tools). */
  listTools(sessionId?: string): Promise<ListToolsResult> {
    return this.send("listTools", sessionId === undefined ? {} : { sessionId });
  }

  /** Add a model tool_use block ({id, name, input}) to the session's current turn. */
  addTool(sessionId: string, toolUse: ToolUse): Promise<AddToolResult> {
    return this.send("addTool", { sessionId, toolUse });
  }

  /** "interrupt": the user pressed Esc (S8); "cancel": kill everything (S9). */
  abort(sessionId: string, reason: "interrupt" | "cancel" = "interrupt"): Promise<AbortResult> {
    return this.send("abort", { sessionId, reason });
  }

  discard(sessionId: string): Promise<DiscardResult> {
    return this.send("discard", { sessionId });
  }

  /** End the turn: answered after its last tool_result and turn_end. */
  drain(sessionId: string): Promise<DrainResult> {
    return this.send("drain", { sessionId });
  }

  respondPermission(
    sessionId: string,
    toolUseId: string,
    decision: "allow" | "deny",
    message?: string,
  ): Promise<Result<"respondPermission">> {
    return this.send("respondPermission", {
      sessionId,
      toolUseId,
      decision,
      ...(message === undefined ? {} : { message }),
    });
  }

  /**
   * Answer an MCP server's request that came as `mcp_request` (sampling,
   * elicitation): its `result`, or an `error` the server gets in words.
   */
  respondMcp(
    sessionId: string,
    requestId: string,
    answer: { result: Record<string, unknown> } | { error: string },
  ): Promise<Result<"respondMcp">> {
    return this.send("respondMcp", { sessionId, requestId, ...answer });
  }

  /**
   * Receive the session's notifications on this connection. `since`:
   * replay every retained one after it first; default: after the last one
   * this client received of the session, or only live ones if none. Those
   * already received are dropped when replayed again.
   */
  subscribe(sessionId: string, since?: number): Promise<SubscribeResult> {
    // Kept from now on: the replay may be read before the caller resumes.
    this.queued.add(sessionId);
    return this.resubscribe(sessionId, since);
  }

  /**
   * subscribe() for onNotification() listeners only (Turn uses it): the
   * session's notifications are not kept for notifications() unless that
   * was asked for, so a client that never iterates does not pile them up.
   */
  follow(sessionId: string, since?: number): Promise<SubscribeResult> {
    return this.resubscribe(sessionId, since);
  }

  private resubscribe(sessionId: string, since?: number): Promise<SubscribeResult> {
    const from = since ?? this.lastSeqs.get(sessionId);
    return this.send("subscribe", from === undefined ? { sessionId } : { sessionId, since: from }, (res) => {
      this.subscribed.add(sessionId);
      // Live notifications follow; anything up to lastSeq is not coming.
      if (from === undefined) this.lastSeqs.set(sessionId, Math.max(this.lastSeq(sessionId), res.lastSeq));
    });
  }

  unsubscribe(sessionId: string): Promise<Result<"unsubscribe">> {
    return this.send("unsubscribe", { sessionId }, () => this.subscribed.delete(sessionId));
  }

  /** Pull instead of push: the retained notifications after `since`. */
  events(sessionId: string, options: { since?: number; max?: number } = {}): Promise<EventsResult> {
    return this.send("events", { sessionId, ...options });
  }

  status(sessionId: string): Promise<StatusResult> {
    return this.send("status", { sessionId });
  }

  /** (extension) The session's whole-output files and whether each is kept. */
  outputFiles(sessionId: string): Promise<Result<"outputFiles">> {
    return this.send("outputFiles", { sessionId });
  }

  // ------------------------------------------------ jobs (PROTOCOL.md §4, Jobs)

  /** (extension) The session's jobs, running and ended. */
  listJobs(sessionId: string): Promise<ListJobsResult> {
    return this.send("listJobs", { sessionId });
  }

  /**
   * (extension) A job's output from `since` (default: where this session's
   * last readJob without `since` stopped); with `waitMs`, waits that long
   * for output or the end when there is nothing new.
   */
  readJob(
    sessionId: string,
    jobId: string,
    options: Omit<ReadJobParams, "sessionId" | "jobId"> = {},
  ): Promise<ReadJobResult> {
    return this.send("readJob", { sessionId, jobId, ...options });
  }

  /** (extension) Bytes for a job's stdin, in order; `eof` closes it after them. */
  writeJob(sessionId: string, jobId: string, data: string, eof?: boolean): Promise<WriteJobResult> {
    return this.send("writeJob", { sessionId, jobId, data, ...(eof === undefined ? {} : { eof }) });
  }

  /** (extension) "interrupt" (SIGINT), "terminate" (TERM, then KILL after the grace) or "kill". */
  signalJob(sessionId: string, jobId: string, signal: JobSignal): Promise<Result<"signalJob">> {
    return this.send("signalJob", { sessionId, jobId, signal });
  }

  /** (extension) The size of a job's terminal (SIGWINCH); a job without one is a StateConflictError. */
  resizeJob(sessionId: string, jobId: string, cols: number, rows: number): Promise<Result<"resizeJob">> {
    return this.send("resizeJob", { sessionId, jobId, cols, rows });
  }

  /** (extension) Input for a running tool of the current turn whose ToolDef has `stdin: "stream"`. */
  writeStdin(sessionId: string, toolUseId: string, data: string, eof?: boolean): Promise<WriteStdinResult> {
    return this.send("writeStdin", { sessionId, toolUseId, data, ...(eof === undefined ? {} : { eof }) });
  }

  /**
   * (extension) A job's output as it comes, by long-polling readJob from
   * `since` (default 0: all the ring still holds): each chunk of text, until
   * the job has ended and everything is read. Output the ring dropped
   * before it was read is skipped. The generator's return value is the last
   * readJob result, which says how the job ended. Reads use explicit
   * offsets, so they do not move the session's own read position
   * (bash_output's).
   */
  async *jobOutput(
    sessionId: string,
    jobId: string,
    options: JobOutputOptions = {},
  ): AsyncGenerator<string, ReadJobResult, undefined> {
    let since = options.since ?? 0;
    const waitMs = options.waitMs ?? 30000;
    for (;;) {
      const r = await this.readJob(sessionId, jobId, {
        since,
        waitMs,
        ...(options.filter === undefined ? {} : { filter: options.filter }),
        ...(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes }),
      });
      const moved = r.next !== since;
      since = r.next;
      if (r.text !== "") yield r.text;
      if (r.status !== "running" && !moved) return r;
      // Nothing consumed although the job runs (a filter holding back a
      // partial line, say): do not spin on answers that come at once.
      if (!moved) await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, 100)));
    }
  }

  // ------------------------------ client-run tools (PROTOCOL.md §4, Client-run tools)

  /**
   * (extension) Run the session's client-run tools (ToolDefs with `runner:
   * "client"`) of these names in this client: claims them (serveTools) and
   * calls `handlers[name](input, {signal, progress, toolUseId, resumed, ...})`
   * for each tool_start. Its outcome (a string, content blocks, or
   * `{content, isError}`) goes back with completeTool; a thrown error is
   * an error result with its message as content; tool_cancel fires
   * `signal`. reconnect() claims the names again. A name another
   * connection serves is a StateConflictError unless `takeOver`.
   */
  serve(sessionId: string, handlers: ToolHandlers, options: ServeOptions = {}): Promise<Result<"serveTools">> {
    return this.serving.serve(sessionId, handlers, options);
  }

  /**
   * (extension) The raw claim, without handlers: the tool_start and
   * tool_cancel notifications of these names go to onServeNotification()
   * listeners, and the listener answers with completeTool. serve() does
   * all of that for you; reconnect() claims again only what serve() claimed.
   */
  serveTools(sessionId: string, names: string[], takeOver?: boolean): Promise<Result<"serveTools">> {
    return this.send("serveTools", { sessionId, names, ...(takeOver ? { takeOver: true } : {}) });
  }

  /**
   * (extension) Call `fn` for every tool_start and tool_cancel this
   * connection gets (they are not session notifications: no seq, never in
   * notifications()). While a listener is set, a call of a name without a
   * serve() handler is left to it. Returns a function that removes it.
   */
  onServeNotification(fn: (note: ServeNotification) => void): () => void {
    this.serveListeners.add(fn);
    return () => this.serveListeners.delete(fn);
  }

  /** (extension) The names this client serves in the session. */
  servedNames(sessionId: string): string[] {
    return this.serving.names(sessionId);
  }

  /** (extension) Progress of a client-run tool this connection runs (serve's `progress` sends it). */
  toolProgress(sessionId: string, toolUseId: string, progress: unknown): Promise<Result<"toolProgress">> {
    return this.send("toolProgress", { sessionId, toolUseId, progress });
  }

  /** (extension) The result of a client-run tool (serve sends it from the handler's outcome). */
  completeTool(sessionId: string, toolUseId: string, content: ToolResultContent, isError?: boolean): Promise<Result<"completeTool">> {
    return this.send("completeTool", { sessionId, toolUseId, content, ...(isError === undefined ? {} : { isError }) });
  }

  /** A view of one session, for `session(sid).serve(...)`. */
  session(sessionId: string): Session {
    return new Session(this, sessionId);
  }

  ping(): Promise<Result<"ping">> {
    return this.send("ping", {});
  }

  stats(): Promise<StatsResult> {
    return this.send("stats", {});
  }

  /** (extension) Prometheus-shaped metric families (PROTOCOL.md, metrics). */
  metrics(): Promise<Result<"metrics">> {
    return this.send("metrics", {});
  }

  // ------------------------------------------------------- notifications

  /**
   * Call `fn` for every notification as it is read (before any iterator
   * sees it). Returns a function that removes it.
   */
  onNotification(fn: (note: Notification) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * The notifications of one session (or of all), in the order received:
   * those kept since the session was subscribe()d (not follow()ed) or since
   * the first notifications() call for it, then live ones; every one is
   * given to one iterator. A session's iterator ends after
   * its session_closed; any iterator ends when close() is called, and
   * throws ConnectionLostError when the connection breaks (reconnect(),
   * then iterate again: nothing is lost).
   */
  notifications(sessionId?: string): AsyncIterableIterator<Notification> {
    if (sessionId === undefined) this.queueAll = true;
    else this.queued.add(sessionId);
    let finished = false;
    let mine: Waiter | undefined;
    const it: AsyncIterableIterator<Notification> = {
      next: () => {
        if (finished) return Promise.resolve({ value: undefined, done: true });
        const note = this.take(sessionId);
        if (note !== undefined) {
          if (sessionId !== undefined && note.method === "session_closed") finished = true;
          return Promise.resolve({ value: note, done: false });
        }
        if (this.broken !== undefined) {
          if (this.closedByUser) return Promise.resolve({ value: undefined, done: true });
          return Promise.reject(this.broken);
        }
        return new Promise<IteratorResult<Notification>>((resolve, reject) => {
          mine = {
            sessionId,
            resolve: (r) => {
              mine = undefined;
              if (!r.done && sessionId !== undefined && r.value.method === "session_closed") finished = true;
              resolve(r);
            },
            reject: (e) => {
              mine = undefined;
              reject(e);
            },
          };
          this.waiters.add(mine);
        });
      },
      return: () => {
        finished = true;
        if (mine !== undefined) {
          this.waiters.delete(mine);
          mine.resolve({ value: undefined, done: true });
        }
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() {
        return it;
      },
    };
    return it;
  }

  // The oldest queued notification of the session, or of any session.
  private take(sessionId: string | undefined): Notification | undefined {
    let key = sessionId;
    if (key === undefined) {
      let oldest = Infinity;
      for (const [sid, q] of this.queues) {
        if (q.peek()!.arrival < oldest) [key, oldest] = [sid, q.peek()!.arrival];
      }
    }
    const q = key === undefined ? undefined : this.queues.get(key);
    const item = q?.shift();
    // Only non-empty queues are kept, so the scan above stays short.
    if (q !== undefined && q.size === 0) this.queues.delete(key!);
    return item?.note;
  }
}

/** One session of a client: `client.session(sid)`. */
export class Session {
  constructor(
    readonly client: Client,
    readonly id: string,
  ) {}

  /** See Client.serve. */
  serve(handlers: ToolHandlers, options: ServeOptions = {}): Promise<Result<"serveTools">> {
    return this.client.serve(this.id, handlers, options);
  }

  /** The names this client serves here. */
  get servedNames(): string[] {
    return this.client.servedNames(this.id);
  }

  close(): Promise<Result<"closeSession">> {
    return this.client.closeSession(this.id);
  }
}
