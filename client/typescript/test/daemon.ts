// The real stexecd on a private socket in a temporary directory, as
// tests/e2e.c starts it: $STEXEC_DAEMON (set by meson), else the daemon of
// the build/ directory next to this package. Its processes carry a tag in
// their environment so a test can check none is left behind.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "../src/index.js";

const defaultDaemon = fileURLToPath(new URL("../../../../build/daemon/stexecd", import.meta.url));

export class Daemon {
  readonly dir: string;
  readonly socket: string;
  readonly tag: string;
  private proc: ChildProcess | undefined;
  private exit: Promise<number | null> | undefined;
  log = "";

  private constructor() {
    this.dir = mkdtempSync(join(tmpdir(), "stexec-ts-"));
    this.socket = join(this.dir, "s.sock");
    this.tag = randomBytes(8).toString("hex");
  }

  /** Start a daemon and wait until it accepts connections. */
  static async start(...args: string[]): Promise<Daemon> {
    const d = new Daemon();
    const env: NodeJS.ProcessEnv = { ...process.env, STEXEC_TS_TAG: d.tag };
    for (const k of ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "STEXEC_SOCKET"]) delete env[k];
    const bin = process.env.STEXEC_DAEMON || defaultDaemon;
    const proc = spawn(bin, ["--socket", d.socket, "--output-dir", join(d.dir, "out"),
      "--state-dir", join(d.dir, "state"), ...args], {
      cwd: d.dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    d.proc = proc;
    proc.stdout!.on("data", (b: Buffer) => (d.log += b.toString()));
    proc.stderr!.on("data", (b: Buffer) => (d.log += b.toString()));
    d.exit = new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
    const spawned = await new Promise<Error | undefined>((resolve) => {
      proc.once("spawn", () => resolve(undefined));
      proc.once("error", (e) => resolve(e));
    });
    if (spawned !== undefined) throw new Error(`cannot start ${bin}: ${spawned.message}`);
    for (let i = 0; ; i++) {
      try {
        (await Client.connect(d.socket)).close();
        return d;
      } catch (err) {
        // A sanitized daemon starts slowly.
        if (i > scaled(300) || proc.exitCode !== null) throw new Error(`stexecd did not start: ${String(err)}\n${d.log}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  get pid(): number {
    return this.proc!.pid!;
  }

  /** Processes of this daemon's tools still alive (zombies do not count). */
  leftovers(): number[] {
    const found: number[] = [];
    for (const name of readdirSync("/proc")) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid === this.pid) continue;
      try {
        const env = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");
        if (!env.includes(`STEXEC_TS_TAG=${this.tag}`)) continue;
        const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
        const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
        if (state === "Z") continue;
        // The running daemon's sentinel is the daemon's, not a tool.
        if (comm === "stexec-sentinel" && Number(ppid) === this.pid && this.proc!.exitCode === null) continue;
        found.push(pid);
      } catch {
        // Gone meanwhile, or not ours to read.
      }
    }
    return found;
  }

  /** SIGTERM; the daemon's exit status (ASan reports leaks through it). */
  async stop(): Promise<number | null> {
    if (this.proc!.exitCode === null) this.proc!.kill("SIGTERM");
    const timer = setTimeout(() => this.proc!.kill("SIGKILL"), scaled(30000));
    const code = await this.exit!;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
    return code;
  }
}

/**
 * The time rule (tests/README.md): every duration a test chooses (a guard,
 * or one given to the daemon) is multiplied by one factor,
 * $STEXEC_TEST_TIME_SCALE (tests/run sets it), else the build's (3 with a
 * sanitizer, else 1).
 */
export function scaled(ms: number): number {
  const v = process.env.STEXEC_TEST_TIME_SCALE || process.env.STEXEC_TEST_BUILD_SCALE || "1";
  const f = Number(v);
  if (!(f >= 1 && f <= 100)) throw new Error(`STEXEC_TEST_TIME_SCALE=${v}: a factor from 1 to 100 was expected`);
  return Math.round(ms * f);
}

/** Wait for cond to hold, for at most ms (scaled). */
export async function until(cond: () => boolean, ms = 20000): Promise<void> {
  const end = Date.now() + scaled(ms);
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 10));
  }
}
