// Errors as typed exceptions: one class per JSON-RPC error code of
// PROTOCOL.md §6, all of them StexecError with the daemon's `code`, and
// the local failures (cannot connect, connection lost, bad reply).

/** The JSON-RPC error codes of PROTOCOL.md §6. Match on these, not on messages. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  UnknownSession: -32001,
  DuplicateToolUse: -32002,
  NotPermitted: -32003,
  LimitExceeded: -32004,
  StateConflict: -32005,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** An error response of the daemon: `code` is the JSON-RPC code, `data` its data member. */
export class StexecError extends Error {
  readonly code: number;
  readonly data: unknown;
  /** The method of the request that failed, when known. */
  readonly method: string | undefined;

  constructor(code: number, message: string, data?: unknown, method?: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.data = data;
    this.method = method;
  }

  /** The most specific class for the code (and data) of an error object. */
  static from(error: { code: number; message: string; data?: unknown }, method?: string): StexecError {
    const cls = byCode.get(error.code) ?? StexecError;
    if (cls === LimitExceededError && oldestSeqOf(error.data) !== undefined)
      return new ReplayGapError(error.code, error.message, error.data, method);
    return new cls(error.code, error.message, error.data, method);
  }
}

export class ParseError extends StexecError {}
export class InvalidRequestError extends StexecError {}
export class MethodNotFoundError extends StexecError {}
/** -32602: `field` names the parameter at fault. */
export class InvalidParamsError extends StexecError {
  get field(): string | undefined {
    const d = this.data as { field?: unknown } | undefined;
    return typeof d?.field === "string" ? d.field : undefined;
  }
}
export class InternalError extends StexecError {}
export class UnknownSessionError extends StexecError {}
export class DuplicateToolUseError extends StexecError {}
export class NotPermittedError extends StexecError {}
export class LimitExceededError extends StexecError {}
/** -32004 with `data.oldestSeq`: notifications after `since` are no longer retained. */
export class ReplayGapError extends LimitExceededError {
  get oldestSeq(): number {
    return oldestSeqOf(this.data) ?? 0;
  }
}
export class StateConflictError extends StexecError {}

const byCode = new Map<number, typeof StexecError>([
  [ErrorCode.ParseError, ParseError],
  [ErrorCode.InvalidRequest, InvalidRequestError],
  [ErrorCode.MethodNotFound, MethodNotFoundError],
  [ErrorCode.InvalidParams, InvalidParamsError],
  [ErrorCode.InternalError, InternalError],
  [ErrorCode.UnknownSession, UnknownSessionError],
  [ErrorCode.DuplicateToolUse, DuplicateToolUseError],
  [ErrorCode.NotPermitted, NotPermittedError],
  [ErrorCode.LimitExceeded, LimitExceededError],
  [ErrorCode.StateConflict, StateConflictError],
]);

function oldestSeqOf(data: unknown): number | undefined {
  const v = (data as { oldestSeq?: unknown } | null | undefined)?.oldestSeq;
  return typeof v === "number" ? v : undefined;
}

/** The socket could not be reached; the message says why and what to do. */
export class ConnectError extends Error {
  readonly path: string;
  readonly errno: string | undefined;

  constructor(message: string, path: string, errno?: string) {
    super(message);
    this.name = "ConnectError";
    this.path = path;
    this.errno = errno;
  }
}

/**
 * The connection closed or broke before the reply came. Sessions live on in
 * the daemon: `client.reconnect()` resumes every subscription with `since`.
 */
export class ConnectionLostError extends Error {
  constructor(message = "connection to stexecd lost") {
    super(message);
    this.name = "ConnectionLostError";
  }
}

/** The daemon sent something that is not the protocol (the connection is closed). */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

/** A Turn's tool got no result because its turn was discarded or its session closed. */
export class TurnEndedError extends Error {
  readonly reason: "discarded" | "session_closed";

  constructor(reason: "discarded" | "session_closed", message: string) {
    super(message);
    this.name = "TurnEndedError";
    this.reason = reason;
  }
}
