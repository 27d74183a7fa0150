// The jobs extension (PROTOCOL.md §4, Jobs): a tool call whose process goes
// on after its tool_result, owned by the session, read and fed by these
// methods. Written by hand from PROTOCOL.md until protocol/schemas carries
// them; then src/protocol.ts generates the same names and these go.
import type { SessionId } from "./protocol.js";

/** A job's state in listJobs and readJob. */
export type JobStatus = "running" | "exited" | "killed";

/** How signalJob ends a job: SIGINT to its group, TERM then KILL, or KILL to everything it started. */
export type JobSignal = "interrupt" | "terminate" | "kill";

/** One job of listJobs. */
export type JobInfo = {
  /** `j-1`, `j-2`, … in the order the session's jobs started. */
  jobId: string;
  toolUseId: string;
  name: string;
  command: string[];
  pid: number | null;
  status: JobStatus;
  /** ms since the epoch */
  startedAt: number;
  exitCode: number | null;
  signal: number | null;
  /** as meta.reason once it ended (ok, exit, signal, killed, memory_limit, process_limit), else null */
  reason: string | null;
  outputBytes: number;
  tty: boolean;
};

export type ListJobsParams = { sessionId: SessionId };
export type ListJobsResult = { jobs: JobInfo[] };

export type ReadJobParams = {
  sessionId: SessionId;
  jobId: string;
  /** byte offset; default: where this session's last readJob without since stopped */
  since?: number;
  /** 1..4194304, default 65536 */
  maxBytes?: number;
  /** 0..60000, default 0: how long to wait for output or the end when there is nothing new */
  waitMs?: number;
  /** a POSIX ERE: only the whole lines that match */
  filter?: string;
};

export type ReadJobResult = {
  text: string;
  /** where text starts (past since when dropped) */
  offset: number;
  /** where the next read goes on */
  next: number;
  /** the ring no longer held bytes from since */
  dropped: boolean;
  status: JobStatus;
  exitCode: number | null;
  signal: number | null;
};

export type WriteJobParams = { sessionId: SessionId; jobId: string; data: string; eof?: boolean };
export type WriteJobResult = { written: number };
export type SignalJobParams = { sessionId: SessionId; jobId: string; signal: JobSignal };
export type SignalJobResult = Record<string, never>;
export type ResizeJobParams = { sessionId: SessionId; jobId: string; cols: number; rows: number };
export type ResizeJobResult = Record<string, never>;
/** For a foreground tool of the current turn whose ToolDef has stdin: "stream". */
export type WriteStdinParams = { sessionId: SessionId; toolUseId: string; data: string; eof?: boolean };
export type WriteStdinResult = { written: number };

export interface JobMethods {
  listJobs: { params: ListJobsParams; result: ListJobsResult };
  readJob: { params: ReadJobParams; result: ReadJobResult };
  writeJob: { params: WriteJobParams; result: WriteJobResult };
  signalJob: { params: SignalJobParams; result: SignalJobResult };
  resizeJob: { params: ResizeJobParams; result: ResizeJobResult };
  writeStdin: { params: WriteStdinParams; result: WriteStdinResult };
}

export const jobMethodNames = ["listJobs", "readJob", "writeJob", "signalJob", "resizeJob", "writeStdin"] as const;

export type JobOutputParams = {
  sessionId: SessionId;
  seq: number;
  jobId: string;
  offset: number;
  text: string;
  /** replayed after a daemon restart: the text (this many bytes) was not kept, and text is empty */
  elided?: number;
};

export type JobExitParams = {
  sessionId: SessionId;
  seq: number;
  jobId: string;
  exitCode: number | null;
  signal: number | null;
  reason: string;
};

/** The session notifications of jobs, without `turn`. */
export type JobNotification =
  | { jsonrpc: "2.0"; method: "job_output"; params: JobOutputParams }
  | { jsonrpc: "2.0"; method: "job_exit"; params: JobExitParams };

/** A tool_result's meta.job when meta.reason is "background". */
export type JobRef = { jobId: string; pid: number };

/** The job a tool_result started (meta.reason "background"), or undefined. */
export function jobOf(meta: { reason: string; job?: unknown } | object): JobRef | undefined {
  const m = meta as { reason?: unknown; job?: { jobId?: unknown; pid?: unknown } };
  if (m.reason !== "background" || typeof m.job?.jobId !== "string") return undefined;
  return { jobId: m.job.jobId, pid: typeof m.job.pid === "number" ? m.job.pid : 0 };
}

export interface JobOutputOptions {
  /** the byte offset to start from; default 0: all the output the ring still holds */
  since?: number;
  /** only the whole lines matching this POSIX ERE */
  filter?: string;
  /** each long poll's wait, 1..60000 ms; default 30000 */
  waitMs?: number;
  /** at most this many bytes per read (1..4194304; default the daemon's 65536) */
  maxBytes?: number;
}

/**
 * A job notification (job_output, job_exit) as its own type: they come
 * through onNotification() and notifications() like every notification of
 * the session, but outside the generated Notification union.
 */
export function asJobNotification(note: { method: string; params?: unknown }): JobNotification | undefined {
  return note.method === "job_output" || note.method === "job_exit" ? (note as JobNotification) : undefined;
}
