// The jobs extension (PROTOCOL.md §4, Jobs): a tool call whose process goes
// on after its tool_result, owned by the session, read and fed by the
// client's job methods. The wire types are generated from protocol/schemas
// (src/protocol.ts); these are the client's own helpers around them.
import type { JobExitParams, JobOutputParams, SignalJobParams } from "./protocol.js";

/** How signalJob ends a job: SIGINT to its group, TERM then KILL, or KILL to everything it started. */
export type JobSignal = SignalJobParams["signal"];

/** The job methods, for tests that check the client has each. */
export const jobMethodNames = ["listJobs", "readJob", "writeJob", "signalJob", "resizeJob", "writeStdin"] as const;

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
