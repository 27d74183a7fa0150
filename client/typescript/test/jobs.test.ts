// Jobs against the real daemon (PROTOCOL.md §4, Jobs): a background tool
// read by jobOutput() while it is fed by writeJob, ended by signalJob, and
// the errors. A daemon without jobs (-32601 for listJobs) skips them.
import assert from "node:assert/strict";
import { after, before, test, type TestContext } from "node:test";
import {
  Client,
  InvalidParamsError,
  MethodNotFoundError,
  StateConflictError,
  asJobNotification,
  jobOf,
  type JobNotification,
  type ToolDef,
  type ToolResultParams,
  contentText,
} from "../src/index.js";
import { Daemon, until } from "./daemon.js";

let d: Daemon;
let c: Client;
let sid: string;
let jobs = true;
const seen: JobNotification[] = [];
const results = new Map<string, ToolResultParams>();

// Jobs: it says it is ready, then echoes its stdin until EOF.
const echo = { name: "echo", command: ["/bin/sh", "-c", "echo ready; exec cat"], background: true } as ToolDef;

before(async () => {
  d = await Daemon.start();
  c = await Client.connect(d.socket);
  ({ sessionId: sid } = await c.createSession({ tools: [echo] }));
  try {
    await c.listJobs(sid);
  } catch (err) {
    if (!(err instanceof MethodNotFoundError)) throw err;
    jobs = false;
  }
  c.onNotification((n) => {
    const j = asJobNotification(n);
    if (j !== undefined) seen.push(j);
    if (n.method === "tool_result") results.set(n.params.toolUseId, n.params);
  });
  await c.follow(sid);
});

after(async () => {
  if (sid !== undefined) await c.closeSession(sid);
  c.close();
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

function skipped(t: TestContext): boolean {
  if (!jobs) t.skip("this daemon has no jobs (listJobs: Method not found)");
  return !jobs;
}

let nextId = 0;
async function start(): Promise<string> {
  const id = `toolu_job${++nextId}`;
  await c.addTool(sid, { id, name: "echo", input: {} });
  await until(() => results.has(id));
  const r = results.get(id)!;
  const job = jobOf(r.meta);
  assert.ok(job !== undefined, `not a job: ${JSON.stringify(r)}`);
  assert.equal(r.result.is_error, false);
  assert.match(contentText(r.result.content), new RegExp(job.jobId));
  return job.jobId;
}

test("a job fed by writeJob and read by jobOutput until it ends", async (t) => {
  if (skipped(t)) return;
  const jobId = await start();
  const { jobs: list } = await c.listJobs(sid);
  const info = list.find((j) => j.jobId === jobId)!;
  assert.equal(info.status, "running");
  assert.equal(info.name, "echo");
  assert.deepEqual(info.command, echo.command);
  assert.equal(info.tty, false);

  const it = c.jobOutput(sid, jobId, { waitMs: 2000 });
  let text = "";
  let wrote = false;
  for (;;) {
    const r = await it.next();
    if (r.done) {
      assert.equal(r.value.status, "exited");
      assert.equal(r.value.exitCode, 0);
      break;
    }
    text += r.value;
    if (!wrote && text.includes("ready\n")) {
      wrote = true;
      assert.deepEqual(await c.writeJob(sid, jobId, "hello\n"), { written: 6 });
      await c.writeJob(sid, jobId, "bye\n", true);
    }
  }
  assert.match(text, /^ready\n[^]*hello\nbye\n$/);
  await assert.rejects(c.writeJob(sid, jobId, "late"), StateConflictError);
  await until(() => seen.some((n) => n.method === "job_exit" && n.params.jobId === jobId));
  const ex = seen.find((n) => n.method === "job_exit" && n.params.jobId === jobId)!;
  assert.ok(ex.method === "job_exit" && ex.params.reason === "ok");
  assert.ok(seen.some((n) => n.method === "job_output" && n.params.jobId === jobId));
});

test("signalJob ends a job; the errors are typed", async (t) => {
  if (skipped(t)) return;
  const jobId = await start();
  await assert.rejects(c.resizeJob(sid, jobId, 100, 30), StateConflictError);
  const follow = (async () => {
    let out = "";
    const it = c.jobOutput(sid, jobId, { waitMs: 2000 });
    for (;;) {
      const r = await it.next();
      if (r.done) return { out, end: r.value };
      out += r.value;
    }
  })();
  // The job says it is ready before it is stopped, so its output is known.
  for (let i = 0; i < 40; i++) {
    if ((await c.readJob(sid, jobId, { since: 0, waitMs: 500 })).text.startsWith("ready\n")) break;
  }
  assert.deepEqual(await c.signalJob(sid, jobId, "terminate"), {});
  const { out, end } = await follow;
  // cat echoes the job's input ({}) too, if it got to it before the TERM.
  assert.match(out, /^ready\n(\{\})?$/);
  assert.equal(end.status, "killed");
  assert.equal((await c.listJobs(sid)).jobs.find((j) => j.jobId === jobId)!.status, "killed");
  await assert.rejects(c.signalJob(sid, jobId, "kill"), StateConflictError);
  await assert.rejects(c.readJob(sid, "j-999"), (e: unknown) => e instanceof InvalidParamsError && e.field === "jobId");
  await assert.rejects(c.writeStdin(sid, "nope", "x"), (e: unknown) => e instanceof InvalidParamsError && e.field === "toolUseId");
});
