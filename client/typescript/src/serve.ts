// Client-run tools (PROTOCOL.md §4, Client-run tools): a ToolDef with
// `runner: "client"` runs in the client that claims its name with
// serveTools. The daemon schedules it like any tool and sends tool_start
// to that connection; the handler's outcome goes back with completeTool,
// tool_cancel fires the handler's AbortSignal.
import { ConnectionLostError, StateConflictError } from "./errors.js";
import type { ToolCancelParams, ToolResultContent, ToolStartParams } from "./protocol.js";

/** Why the daemon cancelled a client-run tool (tool_cancel's reason). */
export type CancelReason = ToolCancelParams["reason"];

/** The AbortSignal's reason when tool_cancel came. */
export class ToolCancelledError extends Error {
  readonly reason: CancelReason;

  constructor(reason: CancelReason) {
    super(`cancelled (${reason})`);
    this.name = "ToolCancelledError";
    this.reason = reason;
  }
}

/** What a handler is given besides the input. */
export interface ToolCallContext {
  /** Fires on tool_cancel; `signal.reason` is a ToolCancelledError. */
  signal: AbortSignal;
  /** Send a progress notification (data: any JSON value) for this call. */
  progress(data: unknown): Promise<void>;
  sessionId: string;
  toolUseId: string;
  turn: number;
  name: string;
  /**
   * The call was started before on a connection that has closed since
   * (tool_start with `resumed: true`): it may have run once already.
   */
  resumed: boolean;
}

/** A handler's outcome: content (a string or content blocks), or both members. */
export type ToolOutcome = ToolResultContent | { content: ToolResultContent; isError?: boolean };

/** A handler: the tool's input and its context; a thrown error is an error result. */
export type ToolHandler = (
  input: Record<string, unknown>,
  ctx: ToolCallContext,
) => ToolOutcome | void | Promise<ToolOutcome | void>;

export type ToolHandlers = Record<string, ToolHandler>;

export interface ServeOptions {
  /** Take names another connection serves (serveTools takeOver). */
  takeOver?: boolean;
  /**
   * Told when a result could not be handed back: completeTool refused
   * (-32005: the call was timed out, or its result delivered otherwise) or
   * failed. Not told of a refusal after tool_cancel, which is expected.
   * Default: nothing.
   */
  onError?: (err: Error, call: { sessionId: string; toolUseId: string; name: string }) => void;
}

/** What serve needs of the client's connection. */
export interface ServePort {
  request(method: "serveTools", params: { sessionId: string; names: string[]; takeOver?: boolean }): Promise<{ names: string[] }>;
  request(method: "completeTool", params: CompleteParams): Promise<unknown>;
  request(method: "toolProgress", params: { sessionId: string; toolUseId: string; progress: unknown }): Promise<unknown>;
}

interface CompleteParams {
  sessionId: string;
  toolUseId: string;
  content: ToolResultContent;
  isError?: boolean;
}

interface Call {
  sessionId: string;
  toolUseId: string;
  turn: number;
  name: string;
  controller: AbortController;
  // Set once the handler settled; kept until the daemon took it.
  outcome: CompleteParams | undefined;
  sending: boolean;
  // Sent before on a connection that broke: the daemon may have it already.
  again: boolean;
  onError: ServeOptions["onError"];
}

interface SessionServe {
  handlers: Map<string, ToolHandler>;
  onError: ServeOptions["onError"];
}

const key = (sid: string, id: string): string => `${sid}\u0000${id}`;

/** The outcome of a handler, as completeTool params. */
export function outcomeParams(sessionId: string, toolUseId: string, out: unknown): CompleteParams {
  if (out === undefined || out === null) return { sessionId, toolUseId, content: "" };
  if (typeof out === "string" || Array.isArray(out)) return { sessionId, toolUseId, content: out as ToolResultContent };
  if (typeof out === "object" && "content" in out) {
    const o = out as { content: ToolResultContent; isError?: boolean };
    return { sessionId, toolUseId, content: o.content ?? "", ...(o.isError ? { isError: true } : {}) };
  }
  // Any other value: its JSON, as a tool's text output.
  return { sessionId, toolUseId, content: JSON.stringify(out) };
}

function errorParams(sessionId: string, toolUseId: string, err: unknown, signal: AbortSignal): CompleteParams {
  const e = signal.aborted && err === signal.reason ? (signal.reason as Error) : err;
  const text = e instanceof Error ? e.message : String(e);
  return { sessionId, toolUseId, content: text === "" ? "Error" : text, isError: true };
}

/** The handlers of one client, by session, and their calls in flight. */
export class Serving {
  private readonly sessions = new Map<string, SessionServe>();
  private readonly calls = new Map<string, Call>();
  // While a reconnect claims the names again, results wait: the daemon
  // takes a result only on the connection its call was started on.
  private held = false;

  constructor(private readonly port: ServePort) {}

  /** Register handlers, then claim their names (tool_start may come before the answer). */
  async serve(sessionId: string, handlers: ToolHandlers, options: ServeOptions = {}): Promise<{ names: string[] }> {
    const names = Object.keys(handlers);
    if (names.length === 0) throw new TypeError("serve: no handlers");
    let s = this.sessions.get(sessionId);
    const fresh = s === undefined;
    if (s === undefined) this.sessions.set(sessionId, (s = { handlers: new Map(), onError: options.onError }));
    const before = new Map(s.handlers);
    for (const n of names) {
      if (typeof handlers[n] !== "function") throw new TypeError(`serve: the handler of ${n} is not a function`);
      s.handlers.set(n, handlers[n]!);
    }
    if (options.onError !== undefined) s.onError = options.onError;
    try {
      return await this.port.request("serveTools", {
        sessionId,
        names,
        ...(options.takeOver ? { takeOver: true } : {}),
      });
    } catch (err) {
      // Not claimed: forget what this call added (a lost connection keeps
      // them, so that the reconnect claims them).
      if (!(err instanceof ConnectionLostError)) {
        if (fresh) this.sessions.delete(sessionId);
        else s.handlers = before;
      }
      throw err;
    }
  }

  /** The names this client serves in the session. */
  names(sessionId: string): string[] {
    return [...(this.sessions.get(sessionId)?.handlers.keys() ?? [])];
  }

  /** Sessions served, for a reconnect to claim again. */
  served(): [string, string[]][] {
    return [...this.sessions].map(([sid, s]) => [sid, [...s.handlers.keys()]]);
  }

  /** The session is gone: forget its handlers and cancel its calls. */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
    for (const [k, c] of this.calls) {
      if (c.sessionId !== sessionId) continue;
      this.calls.delete(k);
      if (!c.controller.signal.aborted) c.controller.abort(new ToolCancelledError("closed"));
    }
  }

  /** Results wait until release(): a reconnect is under way. */
  hold(): void {
    this.held = true;
  }

  /** The claims are made again: send the results that waited, or were cut off. */
  release(): void {
    this.held = false;
    for (const c of this.calls.values()) if (c.outcome !== undefined && !c.sending) this.complete(c);
  }

  /** A tool_start; `listened`: someone else takes calls without a handler. */
  onStart(p: ToolStartParams, listened = false): void {
    const k = key(p.sessionId, p.toolUseId);
    const old = this.calls.get(k);
    if (old !== undefined && old.turn === p.turn) {
      // Already here: still running (its result goes on the connection of
      // the moment), or done and not yet taken: send it again.
      if (old.outcome !== undefined && !old.sending) this.complete(old);
      return;
    }
    const s = this.sessions.get(p.sessionId);
    const handler = s?.handlers.get(p.name);
    if (handler === undefined && listened) return;
    const controller = new AbortController();
    const call: Call = {
      sessionId: p.sessionId,
      toolUseId: p.toolUseId,
      turn: p.turn,
      name: p.name,
      controller,
      outcome: undefined,
      sending: false,
      again: false,
      onError: s?.onError,
    };
    this.calls.set(k, call);
    if (handler === undefined) {
      call.outcome = { sessionId: p.sessionId, toolUseId: p.toolUseId, content: `this client has no handler for ${p.name}`, isError: true };
      this.complete(call);
      return;
    }
    const ctx: ToolCallContext = {
      signal: controller.signal,
      progress: async (data: unknown) => {
        await this.port.request("toolProgress", { sessionId: p.sessionId, toolUseId: p.toolUseId, progress: data ?? null });
      },
      sessionId: p.sessionId,
      toolUseId: p.toolUseId,
      turn: p.turn,
      name: p.name,
      resumed: p.resumed === true,
    };
    // Never synchronously inside the line handler: a handler that throws at
    // once is an error result like one that rejects.
    Promise.resolve()
      .then(() => handler(p.input, ctx))
      .then(
        (out) => outcomeParams(p.sessionId, p.toolUseId, out),
        (err: unknown) => errorParams(p.sessionId, p.toolUseId, err, controller.signal),
      )
      .then((params) => {
        if (this.calls.get(k) !== call) return;
        call.outcome = params;
        this.complete(call);
      });
  }

  onCancel(p: ToolCancelParams): void {
    const c = this.calls.get(key(p.sessionId, p.toolUseId));
    if (c === undefined || c.controller.signal.aborted) return;
    c.controller.abort(new ToolCancelledError(p.reason));
  }

  private complete(c: Call): void {
    if (this.held) return;
    const params = c.outcome!;
    const k = key(c.sessionId, c.toolUseId);
    c.sending = true;
    this.port.request("completeTool", params).then(
      () => {
        if (this.calls.get(k) === c) this.calls.delete(k);
      },
      (err: Error) => {
        c.sending = false;
        // Cut off: kept for the claim after reconnect() to send again.
        if (err instanceof ConnectionLostError) {
          c.again = true;
          return;
        }
        if (this.calls.get(k) === c) this.calls.delete(k);
        // After tool_cancel a refusal is expected (a cancel tool's result is
        // delivered), and so is one of a result sent again (it had arrived).
        if (err instanceof StateConflictError && (c.controller.signal.aborted || c.again)) return;
        c.onError?.(err, { sessionId: c.sessionId, toolUseId: c.toolUseId, name: c.name });
      },
    );
  }
}
