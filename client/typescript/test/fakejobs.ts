// A small in-process stand-in for stexecd that answers the job methods of
// PROTOCOL.md §4, Jobs, over a real Unix socket: one session, jobs whose
// output the test appends, stdin echoed back like `cat`, long polls that
// wait for output or the end, and job_output/job_exit to subscribers. It
// tests the client's logic, not the daemon (methods of the real one are in
// jobs.test.ts).
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JobInfo } from "../src/index.js";

type Json = Record<string, unknown>;

export interface FakeJob {
  info: JobInfo;
  out: string;
  cursor: number;
  stdin: string;
  stdinClosed: boolean;
  size: [number, number];
  echo: boolean;
}

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export class FakeDaemon {
  readonly dir = mkdtempSync(join(tmpdir(), "stexec-ts-fake-"));
  readonly socket = join(this.dir, "s.sock");
  readonly sessionId = "s-fake";
  readonly jobs = new Map<string, FakeJob>();
  /** Every request received, in order. */
  readonly requests: { method: string; params: Json }[] = [];
  /** Answer these methods with -32601, as a daemon without jobs does. */
  readonly missing = new Set<string>();
  private readonly server = net.createServer((s) => this.serve(s));
  private readonly subscribers = new Set<net.Socket>();
  private readonly wakers = new Set<() => void>();
  private seq = 0;
  private streaming = new Set<string>();

  static async start(): Promise<FakeDaemon> {
    const f = new FakeDaemon();
    await new Promise<void>((resolve) => f.server.listen(f.socket, resolve));
    return f;
  }

  async stop(): Promise<void> {
    for (const s of this.subscribers) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** A running job; `echo`: its stdin comes back as its output, as `cat` would. */
  addJob(opts: { tty?: boolean; echo?: boolean } = {}): FakeJob {
    const jobId = `j-${this.jobs.size + 1}`;
    const job: FakeJob = {
      info: {
        jobId,
        toolUseId: `t-${jobId}`,
        name: "bash",
        command: ["/bin/bash", "-c", "cat"],
        pid: 1000 + this.jobs.size,
        status: "running",
        startedAt: Date.now(),
        exitCode: null,
        signal: null,
        reason: null,
        outputBytes: 0,
        tty: opts.tty ?? false,
      },
      out: "",
      cursor: 0,
      stdin: "",
      stdinClosed: false,
      size: [80, 24],
      echo: opts.echo ?? false,
    };
    this.jobs.set(jobId, job);
    return job;
  }

  /** The job writes (ASCII, so bytes and characters count alike). */
  output(job: FakeJob, text: string): void {
    const offset = job.out.length;
    job.out += text;
    job.info.outputBytes = job.out.length;
    this.notify("job_output", { jobId: job.info.jobId, offset, text });
    this.wake();
  }

  /** The job ends. */
  exit(job: FakeJob, how: { exitCode?: number; signal?: number; killed?: boolean } = {}): void {
    job.info.status = how.killed ? "killed" : "exited";
    job.info.exitCode = how.signal === undefined ? (how.exitCode ?? 0) : null;
    job.info.signal = how.signal ?? null;
    job.info.reason = how.killed ? "killed" : how.signal !== undefined ? "signal" : job.info.exitCode === 0 ? "ok" : "exit";
    job.info.pid = null;
    this.notify("job_exit", {
      jobId: job.info.jobId,
      exitCode: job.info.exitCode,
      signal: job.info.signal,
      reason: job.info.reason,
    });
    this.wake();
  }

  /** A foreground tool of the current turn with stdin: "stream". */
  streamTool(toolUseId: string): void {
    this.streaming.add(toolUseId);
  }

  private wake(): void {
    const ws = [...this.wakers];
    this.wakers.clear();
    for (const w of ws) w();
  }

  private notify(method: string, params: Json): void {
    const line = JSON.stringify({ jsonrpc: "2.0", method, params: { sessionId: this.sessionId, seq: ++this.seq, ...params } }) + "\n";
    for (const s of this.subscribers) s.write(line);
  }

  private serve(sock: net.Socket): void {
    let buf = "";
    sock.on("data", (chunk) => {
      buf += chunk.toString("utf8");
      for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        void this.answer(sock, JSON.parse(line) as { id: number; method: string; params?: Json });
      }
    });
    sock.on("close", () => this.subscribers.delete(sock));
    sock.on("error", () => undefined);
  }

  private async answer(sock: net.Socket, msg: { id: number; method: string; params?: Json }): Promise<void> {
    const params = msg.params ?? {};
    this.requests.push({ method: msg.method, params });
    let reply: Json;
    try {
      reply = { result: await this.call(sock, msg.method, params) };
    } catch (e) {
      if (!(e instanceof RpcError)) throw e;
      reply = { error: { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) } };
    }
    if (!sock.destroyed) sock.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...reply }) + "\n");
  }

  private job(params: Json): FakeJob {
    if (params.sessionId !== this.sessionId) throw new RpcError(-32001, `Unknown session: ${String(params.sessionId)}`);
    const job = this.jobs.get(params.jobId as string);
    if (job === undefined)
      throw new RpcError(-32602, `Invalid params: jobId: no such job: ${String(params.jobId)}`, { field: "jobId" });
    return job;
  }

  private async call(sock: net.Socket, method: string, params: Json): Promise<unknown> {
    if (this.missing.has(method)) throw new RpcError(-32601, `Method not found: ${method}`);
    switch (method) {
      case "ping":
        return {};
      case "subscribe":
        this.subscribers.add(sock);
        return { lastSeq: this.seq };
      case "listJobs":
        if (params.sessionId !== this.sessionId) throw new RpcError(-32001, "Unknown session");
        return { jobs: [...this.jobs.values()].map((j) => j.info) };
      case "readJob":
        return this.read(this.job(params), params);
      case "writeJob": {
        const job = this.job(params);
        if (job.info.status !== "running") throw new RpcError(-32005, `State conflict: job ${job.info.jobId} has ended`);
        if (job.stdinClosed) throw new RpcError(-32005, `State conflict: job ${job.info.jobId}: its stdin is closed`);
        const data = params.data as string;
        job.stdin += data;
        if (params.eof === true) job.stdinClosed = true;
        if (job.echo) {
          if (data !== "") this.output(job, data);
          if (job.stdinClosed) this.exit(job);
        }
        return { written: Buffer.byteLength(data) };
      }
      case "signalJob": {
        const job = this.job(params);
        if (job.info.status !== "running") throw new RpcError(-32005, `State conflict: job ${job.info.jobId} has ended`);
        const sig = { interrupt: 2, terminate: 15, kill: 9 }[params.signal as string];
        if (sig === undefined) throw new RpcError(-32602, "Invalid params: signal: unknown", { field: "signal" });
        this.exit(job, { signal: sig, killed: true });
        return {};
      }
      case "resizeJob": {
        const job = this.job(params);
        if (!job.info.tty) throw new RpcError(-32005, `State conflict: job ${job.info.jobId} has no terminal`);
        job.size = [params.cols as number, params.rows as number];
        return {};
      }
      case "writeStdin":
        if (!this.streaming.has(params.toolUseId as string))
          throw new RpcError(-32602, "Invalid params: toolUseId: no such tool", { field: "toolUseId" });
        return { written: Buffer.byteLength(params.data as string) };
      default:
        throw new RpcError(-32601, `Method not found: ${method}`);
    }
  }

  private async read(job: FakeJob, params: Json): Promise<unknown> {
    const since = typeof params.since === "number" ? params.since : job.cursor;
    const maxBytes = typeof params.maxBytes === "number" ? params.maxBytes : 65536;
    const waitMs = typeof params.waitMs === "number" ? params.waitMs : 0;
    if (since >= job.out.length && job.info.status === "running" && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.wakers.delete(resolve);
          resolve();
        }, waitMs);
        this.wakers.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    let text = job.out.slice(since, since + maxBytes);
    let next = since + text.length;
    if (typeof params.filter === "string") {
      // Whole lines only: a partial last line waits for its newline, or the end.
      const ended = job.info.status !== "running" && next === job.out.length;
      const end = ended ? text.length : text.lastIndexOf("\n") + 1;
      const re = new RegExp(params.filter);
      text = text.slice(0, end);
      next = since + end;
      text = text
        .split(/(?<=\n)/)
        .filter((l) => re.test(l))
        .join("");
    }
    if (params.since === undefined) job.cursor = next;
    const s = job.info;
    return { text, offset: since, next, dropped: false, status: s.status, exitCode: s.exitCode, signal: s.signal };
  }
}
