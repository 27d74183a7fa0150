// Every method of PROTOCOL.md §4 and the error classes, against the real
// daemon.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  Client,
  DuplicateToolUseError,
  InvalidParamsError,
  InvalidRequestError,
  LimitExceededError,
  MethodNotFoundError,
  ReplayGapError,
  StateConflictError,
  StexecError,
  UnknownSessionError,
  type Notification,
  type ToolDef,
  type ToolResultParams,
  contentText,
} from "../src/index.js";
import { Daemon, until } from "./daemon.js";

let d: Daemon;
let c: Client;

before(async () => {
  d = await Daemon.start("--max-tools-per-turn", "4");
  c = await Client.connect(d.socket);
});

after(async () => {
  c.close();
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

// Every notification of sid that arrives from now on, kept in order.
function record(client: Client, sid: string): Notification[] {
  const seen: Notification[] = [];
  client.onNotification((n) => {
    if (n.params.sessionId === sid) seen.push(n);
  });
  return seen;
}

const resultOf = (seen: Notification[], id: string): ToolResultParams | undefined => {
  for (const n of seen) if (n.method === "tool_result" && n.params.toolUseId === id) return n.params;
  return undefined;
};

test("initialize, ping, stats, listTools without a session", async () => {
  const info = await c.initialize({ name: "methods.test", version: "1" });
  assert.equal(info.protocolVersion, 1);
  assert.equal(info.server.name, "stexecd");
  assert.equal(typeof info.capabilities.maxMessage, "number");
  assert.deepEqual(await c.ping(), {});
  const stats = await c.stats();
  assert.equal(stats.pid, d.pid);
  assert.ok(stats.connections >= 1);
  const { metrics } = await c.metrics();
  assert.ok(metrics.some((f) => f.name === "stexec_tools_started_total" && f.type === "counter"));
  const { tools } = await c.listTools();
  const names = tools.map((t) => t.name).sort();
  for (const n of ["bash", "bash_session", "glob", "grep", "list_dir", "read_file", "write_file"]) assert.ok(names.includes(n), n);
  const bash = tools.find((t) => t.name === "bash")!;
  assert.equal(bash.interruptBehavior, "cancel");
  assert.equal(bash.timeoutFromInput, "timeout");
});

test("createSession with tools, cwd and env; listSessions; listTools of the session; closeSession", async () => {
  const work = join(d.dir, "work");
  mkdirSync(work);
  const echo: ToolDef = { name: "where", command: ["/bin/sh", "-c", 'printf "%s %s" "$(pwd)" "$GREETING"'], concurrencySafe: true };
  const { sessionId } = await c.createSession({ tools: [echo], cwd: work, env: { GREETING: "hi" }, maxParallel: 2 });
  assert.match(sessionId, /^s-/);
  const { sessions } = await c.listSessions();
  const mine = sessions.find((s) => s.sessionId === sessionId);
  assert.deepEqual(mine, { sessionId, turn: 1, unfinished: 0 });
  const { tools } = await c.listTools(sessionId);
  const where = tools.find((t) => t.name === "where")!;
  assert.equal(where.concurrencySafe, true);
  assert.equal(where.timeoutMs, 120000);

  const seen = record(c, sessionId);
  assert.deepEqual(await c.subscribe(sessionId, 0), { lastSeq: 0 });
  const added = await c.addTool(sessionId, { id: "w1", name: "where", input: {} });
  assert.equal(added.toolUseId, "w1");
  assert.equal(added.turn, 1);
  assert.equal(added.concurrencySafe, true);
  assert.deepEqual(await c.drain(sessionId), { turn: 1, results: 1 });
  // drain is answered after the turn's results and turn_end (§3.5).
  assert.equal(resultOf(seen, "w1")!.result.content, `${work} hi`);
  assert.equal(resultOf(seen, "w1")!.meta.reason, "ok");
  assert.deepEqual(seen.at(-1)!.params, { sessionId, seq: seen.at(-1)!.params.seq, turn: 1, reason: "drained" });

  assert.deepEqual(await c.closeSession(sessionId), {});
  await until(() => seen.at(-1)?.method === "session_closed");
  await assert.rejects(c.status(sessionId), UnknownSessionError);
  assert.ok(!(await c.listSessions()).sessions.some((s) => s.sessionId === sessionId));
});

test("status, abort, discard, unsubscribe and events", async () => {
  const { sessionId: sid } = await c.createSession();
  const seen = record(c, sid);
  await c.subscribe(sid);
  await c.addTool(sid, { id: "b1", name: "bash", input: { command: "sleep 30" } });
  await c.addTool(sid, { id: "b2", name: "bash", input: { command: "echo never" } });
  const st = await c.status(sid);
  assert.equal(st.turn, 1);
  assert.deepEqual(st.tools.map((t) => [t.id, t.status]), [["b1", "executing"], ["b2", "queued"]]);
  assert.ok(typeof st.tools[0]!.pid === "number");
  assert.equal(st.interruptible, true);

  assert.deepEqual(await c.abort(sid, "interrupt"), { turn: 1 });
  const drained = await c.drain(sid);
  assert.deepEqual(drained, { turn: 1, results: 2 });
  assert.equal(resultOf(seen, "b1")!.meta.reason, "interrupted");
  assert.equal(resultOf(seen, "b2")!.meta.reason, "interrupted");

  await c.addTool(sid, { id: "b3", name: "bash", input: { command: "sleep 30" } });
  assert.deepEqual(await c.discard(sid), { discardedTurn: 2, turn: 3 });
  await until(() => seen.some((n) => n.method === "turn_end" && n.params.reason === "discarded"));
  assert.equal(resultOf(seen, "b3"), undefined);

  // events returns what a subscriber got, the same objects, from the
  // oldest retained (turn 2 on: the previous turn's start).
  const ev = await c.events(sid, { max: 10000 });
  const first = ev.notifications[0]!.params.seq;
  assert.ok(first > 1);
  // The killed tool's last state may come after the turn_end (and after ev).
  assert.deepEqual(ev.notifications, seen.filter((n) => n.params.seq >= first && n.params.seq <= ev.lastSeq));
  assert.equal(ev.lastSeq, ev.notifications.at(-1)!.params.seq);
  assert.ok(ev.notifications.some((n) => n.method === "turn_end" && n.params.reason === "discarded"));
  const page = await c.events(sid, { since: first, max: 2 });
  assert.deepEqual(page.notifications.map((n) => n.params.seq), [first + 1, first + 2]);
  assert.equal(page.lastSeq, first + 2);

  assert.deepEqual(await c.unsubscribe(sid), {});
  const before = seen.length;
  await c.addTool(sid, { id: "b4", name: "bash", input: { command: "true" } });
  await c.drain(sid);
  assert.equal(seen.length, before, "notifications after unsubscribe");
  await c.closeSession(sid);
});

test("respondPermission allow and deny", async () => {
  const ask: ToolDef = { name: "ask", command: ["/bin/echo", "granted"], requiresPermission: true, concurrencySafe: true };
  const { sessionId: sid } = await c.createSession({ tools: [ask] });
  const seen = record(c, sid);
  await c.subscribe(sid);
  const a = await c.addTool(sid, { id: "p1", name: "ask", input: {} });
  assert.equal(a.status, "waiting_permission");
  await c.addTool(sid, { id: "p2", name: "ask", input: {} });
  await until(() => seen.filter((n) => n.method === "permission_request").length === 2);
  const req = seen.find((n) => n.method === "permission_request")!;
  assert.equal(req.method === "permission_request" && req.params.name, "ask");
  assert.deepEqual(await c.respondPermission(sid, "p1", "allow"), {});
  await until(() => resultOf(seen, "p1") !== undefined);
  assert.equal(resultOf(seen, "p1")!.result.content, "granted\n");
  // Answered twice: the tool is no longer waiting.
  await assert.rejects(c.respondPermission(sid, "p1", "allow"), StateConflictError);
  await c.respondPermission(sid, "p2", "deny", "no, thanks");
  await c.drain(sid);
  assert.equal(resultOf(seen, "p2")!.result.content, "no, thanks");
  assert.equal(resultOf(seen, "p2")!.meta.reason, "permission_denied");
  await c.closeSession(sid);
});

test("errors arrive as their classes with the JSON-RPC code", async () => {
  await assert.rejects(c.status("s-0000000000000000"), (e: unknown) => {
    assert.ok(e instanceof UnknownSessionError);
    assert.equal(e.code, -32001);
    assert.equal(e.method, "status");
    return true;
  });
  await assert.rejects(c.request("noSuchMethod" as "ping"), (e: unknown) => e instanceof MethodNotFoundError && e.code === -32601);
  await assert.rejects(c.createSession({ maxParallel: 0 }), (e: unknown) => {
    assert.ok(e instanceof InvalidParamsError);
    assert.equal(e.code, -32602);
    assert.equal(e.field, "maxParallel");
    return true;
  });
  await assert.rejects(c.request("createSession", null as never), (e: unknown) => e instanceof InvalidRequestError && e.code === -32600);

  const { sessionId: sid } = await c.createSession();
  await c.addTool(sid, { id: "x", name: "no_such_tool", input: {} });
  await assert.rejects(c.addTool(sid, { id: "x", name: "bash", input: { command: "true" } }), DuplicateToolUseError);
  for (const id of ["y", "z", "w"]) await c.addTool(sid, { id, name: "no_such_tool" });
  await assert.rejects(c.addTool(sid, { id: "v", name: "no_such_tool" }), (e: unknown) => {
    assert.ok(e instanceof LimitExceededError && !(e instanceof ReplayGapError));
    assert.equal(e.code, -32004);
    return true;
  });
  await c.drain(sid);
  // The session keeps the previous turn's notifications: turn 1 is gone by turn 3.
  for (const id of ["t2", "t3"]) {
    await c.addTool(sid, { id, name: "no_such_tool" });
    await c.drain(sid);
  }
  await assert.rejects(c.subscribe(sid, 0), (e: unknown) => {
    assert.ok(e instanceof ReplayGapError);
    assert.ok(e.oldestSeq > 1);
    return true;
  });
  await assert.rejects(c.events(sid, { since: 0 }), ReplayGapError);
  await c.closeSession(sid);
  // A drain pending when the session closes.
  const { sessionId: s2 } = await c.createSession();
  await c.addTool(s2, { id: "long", name: "bash", input: { command: "sleep 30" } });
  const pending = assert.rejects(c.drain(s2), (e: unknown) => e instanceof StateConflictError && e instanceof StexecError);
  await c.closeSession(s2);
  await pending;
});

test("an input the schema rejects is a result, not an RPC error", async () => {
  const { sessionId: sid } = await c.createSession({ tools: [{ name: "t", command: ["/bin/true"] }] });
  const seen = record(c, sid);
  await c.subscribe(sid);
  await c.addTool(sid, { id: "bad", name: "bash", input: {} });
  await c.drain(sid);
  assert.equal(resultOf(seen, "bad")!.meta.reason, "invalid_input");
  await c.closeSession(sid);
});

test("writes the model would ask for work through the client", async () => {
  const { sessionId: sid } = await c.createSession({ cwd: d.dir });
  const seen = record(c, sid);
  await c.subscribe(sid);
  const file = join(d.dir, "hello.txt");
  writeFileSync(file, "");
  await c.addTool(sid, { id: "w", name: "write_file", input: { file_path: file, content: "hello\n" } });
  await c.drain(sid);
  await c.addTool(sid, { id: "r", name: "read_file", input: { file_path: file } });
  await c.drain(sid);
  assert.match(contentText(resultOf(seen, "r")!.result.content), /hello/);
  await c.closeSession(sid);
});

test("outputFiles names a truncated result's whole output (extension)", async () => {
  const big: ToolDef = { name: "big", command: ["/bin/sh", "-c", "seq 1 5000"], maxResultBytes: 1000 };
  const { sessionId } = await c.createSession({ tools: [big] });
  assert.deepEqual(await c.outputFiles(sessionId), { files: [] });
  const seen = record(c, sessionId);
  await c.subscribe(sessionId);
  await c.addTool(sessionId, { id: "b1", name: "big", input: {} });
  await c.drain(sessionId);
  const meta = resultOf(seen, "b1")!.meta;
  assert.equal(meta.truncated, true);
  const { files } = await c.outputFiles(sessionId);
  assert.equal(files.length, 1);
  assert.equal(files[0].toolUseId, "b1");
  assert.equal(files[0].path, meta.fullOutputPath);
  assert.equal(files[0].removed, null);
  await c.closeSession(sessionId);
});
