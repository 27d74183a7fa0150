// The job methods and jobOutput() against the in-process fake of
// fakejobs.ts (PROTOCOL.md §4, Jobs): what goes on the wire, the typed
// errors, and the iterator's long polls, ends and filters.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  Client,
  InvalidParamsError,
  MethodNotFoundError,
  StateConflictError,
  asJobNotification,
  jobMethodNames,
  jobOf,
  type JobNotification,
} from "../src/index.js";
import { FakeDaemon } from "./fakejobs.js";

let f: FakeDaemon;
let c: Client;

before(async () => {
  f = await FakeDaemon.start();
  c = await Client.connect(f.socket);
});

after(async () => {
  c.close();
  await f.stop();
});

const sid = () => f.sessionId;
const last = (method: string) => [...f.requests].reverse().find((r) => r.method === method)!.params;

test("a typed method for every job method", () => {
  const proto = Client.prototype as unknown as Record<string, unknown>;
  for (const m of jobMethodNames) assert.equal(typeof proto[m], "function", `Client has no method ${m}`);
});

test("listJobs, readJob, writeJob, signalJob, resizeJob and writeStdin send the named params", async () => {
  const job = f.addJob({ tty: true });
  f.output(job, "hello\n");
  const { jobs } = await c.listJobs(sid());
  const mine = jobs.find((j) => j.jobId === job.info.jobId)!;
  assert.equal(mine.status, "running");
  assert.equal(mine.outputBytes, 6);
  assert.equal(mine.tty, true);

  const r = await c.readJob(sid(), job.info.jobId, { since: 1, maxBytes: 3 });
  assert.deepEqual(r, { text: "ell", offset: 1, next: 4, dropped: false, status: "running", exitCode: null, signal: null });
  assert.deepEqual(last("readJob"), { sessionId: sid(), jobId: job.info.jobId, since: 1, maxBytes: 3 });
  // Without since: the session's own position.
  assert.equal((await c.readJob(sid(), job.info.jobId)).text, "hello\n");
  assert.equal((await c.readJob(sid(), job.info.jobId)).text, "");

  assert.deepEqual(await c.writeJob(sid(), job.info.jobId, "2+2\n"), { written: 4 });
  assert.deepEqual(last("writeJob"), { sessionId: sid(), jobId: job.info.jobId, data: "2+2\n" });
  await c.writeJob(sid(), job.info.jobId, "", true);
  assert.deepEqual(last("writeJob"), { sessionId: sid(), jobId: job.info.jobId, data: "", eof: true });
  assert.equal(job.stdin, "2+2\n");
  await assert.rejects(c.writeJob(sid(), job.info.jobId, "more"), StateConflictError);

  assert.deepEqual(await c.resizeJob(sid(), job.info.jobId, 120, 40), {});
  assert.deepEqual(job.size, [120, 40]);

  assert.deepEqual(await c.signalJob(sid(), job.info.jobId, "terminate"), {});
  assert.deepEqual(last("signalJob"), { sessionId: sid(), jobId: job.info.jobId, signal: "terminate" });
  assert.equal(job.info.status, "killed");
  await assert.rejects(c.signalJob(sid(), job.info.jobId, "kill"), (e: unknown) => {
    assert.ok(e instanceof StateConflictError);
    assert.equal(e.method, "signalJob");
    assert.match(e.message, /has ended/);
    return true;
  });

  f.streamTool("toolu_9");
  assert.deepEqual(await c.writeStdin(sid(), "toolu_9", "y\n", true), { written: 2 });
  assert.deepEqual(last("writeStdin"), { sessionId: sid(), toolUseId: "toolu_9", data: "y\n", eof: true });
});

test("an unknown job id is InvalidParamsError naming jobId; a job without a terminal cannot be resized", async () => {
  await assert.rejects(c.readJob(sid(), "j-99"), (e: unknown) => {
    assert.ok(e instanceof InvalidParamsError);
    assert.equal(e.field, "jobId");
    return true;
  });
  const plain = f.addJob();
  await assert.rejects(c.resizeJob(sid(), plain.info.jobId, 80, 24), StateConflictError);
  await assert.rejects(c.writeStdin(sid(), "nope", "x"), (e: unknown) => e instanceof InvalidParamsError && e.field === "toolUseId");
  f.exit(plain);
});

test("a daemon without jobs: MethodNotFoundError", async () => {
  f.missing.add("listJobs");
  try {
    await assert.rejects(c.listJobs(sid()), MethodNotFoundError);
  } finally {
    f.missing.delete("listJobs");
  }
});

test("jobOutput long-polls and yields each chunk until the job ended and all is read", async () => {
  const job = f.addJob();
  f.output(job, "one\n");
  const chunks: string[] = [];
  const done = (async () => {
    const it = c.jobOutput(sid(), job.info.jobId, { waitMs: 5000 });
    for (;;) {
      const r = await it.next();
      if (r.done) return r.value;
      chunks.push(r.value);
      if (r.value === "one\n") setTimeout(() => f.output(job, "two\n"), 20);
      if (r.value === "two\n") setTimeout(() => (f.output(job, "three"), f.exit(job, { exitCode: 3 })), 20);
    }
  })();
  const end = await done;
  assert.equal(chunks.join(""), "one\ntwo\nthree");
  assert.equal(end.status, "exited");
  assert.equal(end.exitCode, 3);
  // Every read named its offset and waited: no busy polling.
  const reads = f.requests.filter((r) => r.method === "readJob" && r.params.jobId === job.info.jobId);
  for (const r of reads) {
    assert.equal(typeof r.params.since, "number");
    assert.equal(r.params.waitMs, 5000);
  }
  assert.ok(reads.length <= 6, `${reads.length} reads`);
  // The session's own read position (bash_output's) did not move.
  assert.equal(job.cursor, 0);
});

test("jobOutput from since, with a filter, and of a job that has already ended", async () => {
  const job = f.addJob();
  f.output(job, "GET /a\nnoise\nGET /b\npartial GET");
  f.exit(job);
  const got: string[] = [];
  for await (const t of c.jobOutput(sid(), job.info.jobId, { filter: "GET", waitMs: 1000 })) got.push(t);
  assert.equal(got.join(""), "GET /a\nGET /b\npartial GET");
  const tail: string[] = [];
  for await (const t of c.jobOutput(sid(), job.info.jobId, { since: 7, maxBytes: 4 })) tail.push(t);
  assert.deepEqual(tail, ["nois", "e\nGE", "T /b", "\npar", "tial", " GET"]);
});

test("a filter that holds back a partial line does not spin", async () => {
  const job = f.addJob();
  f.output(job, "no newline yet");
  const it = c.jobOutput(sid(), job.info.jobId, { filter: ".", waitMs: 2000 });
  const first = it.next();
  await new Promise((r) => setTimeout(r, 300));
  const reads = f.requests.filter((r) => r.method === "readJob" && r.params.jobId === job.info.jobId).length;
  assert.ok(reads <= 5, `${reads} reads in 300 ms`);
  f.output(job, "\n");
  assert.deepEqual(await first, { value: "no newline yet\n", done: false });
  f.exit(job);
  assert.equal((await it.next()).done, true);
});

test("job_output and job_exit reach subscribers; asJobNotification and jobOf type them", async () => {
  const seen: JobNotification[] = [];
  const stop = c.onNotification((n) => {
    const j = asJobNotification(n);
    if (j !== undefined) seen.push(j);
  });
  await c.subscribe(sid());
  const job = f.addJob({ echo: true });
  await c.writeJob(sid(), job.info.jobId, "ping\n", true);
  await c.ping();
  stop();
  const mine = seen.filter((n) => n.params.jobId === job.info.jobId);
  assert.deepEqual(
    mine.map((n) => n.method),
    ["job_output", "job_exit"],
  );
  const out = mine[0]!;
  assert.ok(out.method === "job_output" && out.params.text === "ping\n" && out.params.offset === 0);
  const ex = mine[1]!;
  assert.ok(ex.method === "job_exit" && ex.params.reason === "ok" && ex.params.exitCode === 0);
  assert.equal(asJobNotification({ method: "tool_result", params: {} }), undefined);

  assert.deepEqual(jobOf({ reason: "background", job: { jobId: "j-3", pid: 42 } }), { jobId: "j-3", pid: 42 });
  assert.equal(jobOf({ reason: "ok" }), undefined);
});
