// The Turn helper with real tools: parallel safe tools, results in add
// order whatever order they finish in, per-tool promises, discard.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, Turn, TurnEndedError, type Notification, type ToolDef, contentText } from "../src/index.js";
import { Daemon } from "./daemon.js";

let d: Daemon;
let c: Client;

// Sleeps {delay} seconds, then prints {label}.
const nap: ToolDef = {
  name: "nap",
  command: ["/bin/sh", "-c", 'sleep "$1"; echo "$2"', "nap", "{delay}", "{label}"],
  concurrencySafe: true,
};
const step: ToolDef = { ...nap, name: "step", concurrencySafe: false };

before(async () => {
  d = await Daemon.start();
  c = await Client.connect(d.socket);
});

after(async () => {
  c.close();
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

test("tools added as the stream parses them; results in add order; safe ones in parallel", async () => {
  const { sessionId: sid } = await c.createSession({ tools: [nap, step] });
  const seen: Notification[] = [];
  c.onNotification((n) => n.params.sessionId === sid && seen.push(n));
  const turn = await Turn.begin(c, sid);
  assert.equal(turn.number, 1);

  // Read results while the tools are still being added.
  const order: string[] = [];
  const reading = (async () => {
    for await (const r of turn.results()) order.push(`${r.toolUseId}:${contentText(r.result.content).trim()}`);
  })();
  const stream: Array<[string, string, number, string]> = [
    // Margins wide enough for a loaded machine and a sanitized daemon.
    ["a", "nap", 1.5, "A"],
    ["b", "nap", 0.6, "B"],
    ["c", "nap", 1.0, "C"],
    ["u", "step", 0, "U"],
    ["x", "no_such_tool", 0, ""],
  ];
  for (const [id, name, delay, label] of stream) {
    await turn.add({ type: "tool_use", id, name, input: { delay, label } });
    await new Promise((r) => setTimeout(r, 20));
  }
  const b = await turn.result("b");
  assert.equal(b.result.content, "B\n");
  // The daemon sends b's result after a's (S5), so a's is in by now.
  assert.ok(seen.some((n) => n.method === "tool_result" && n.params.toolUseId === "a"));

  const outcome = await turn.drain();
  await reading;
  assert.deepEqual(order, ["a:A", "b:B", "c:C", "u:U", `x:<tool_use_error>Error: No such tool available: no_such_tool</tool_use_error>`]);
  assert.equal(outcome.turn, 1);
  assert.deepEqual(outcome.results.map((r) => r.tool_use_id), ["a", "b", "c", "u", "x"]);
  assert.deepEqual(outcome.results.map((r) => r.is_error), [false, false, false, false, true]);
  assert.equal(outcome.tools[4]!.meta.reason, "unknown_tool");

  const idx = (pred: (n: Notification) => boolean): number => seen.findIndex(pred);
  const status = (id: string, s: string) => (n: Notification) =>
    n.method === "tool_status" && n.params.toolUseId === id && n.params.status === s;
  const result = (id: string) => (n: Notification) => n.method === "tool_result" && n.params.toolUseId === id;
  // The three safe tools ran at once.
  assert.ok(seen.some((n) => n.method === "state" && ["a", "b", "c"].every((id) => n.params.inProgress.includes(id))));
  // b finished first, but its result waited for a's.
  assert.ok(idx(status("b", "completed")) < idx(status("a", "completed")));
  assert.ok(idx(result("a")) < idx(result("b")));
  // The unsafe tool started only once every safe one was done.
  assert.ok(idx(status("u", "executing")) > idx(status("a", "completed")));
  // A finished turn takes no more tools; the next Turn is turn 2.
  await assert.rejects(turn.add({ id: "late", name: "nap", input: { delay: 0, label: "L" } }), /turn 1 is over/);
  const next = await Turn.begin(c, sid);
  assert.equal(next.number, 2);
  assert.deepEqual((await next.drain()).results, []);
  // Nobody iterates notifications(): none were kept.
  assert.equal((c as unknown as { queues: Map<string, unknown> }).queues.size, 0);
  await c.closeSession(sid);
});

test("discard: pending results reject with TurnEndedError", async () => {
  const { sessionId: sid } = await c.createSession({ tools: [nap] });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "long", name: "bash", input: { command: "sleep 30" } });
  const res = turn.result("long");
  const disc = await turn.discard();
  assert.deepEqual(disc, { discardedTurn: 1, turn: 2 });
  await assert.rejects(res, (e: unknown) => e instanceof TurnEndedError && e.reason === "discarded");
  await assert.rejects(turn.drain(), TurnEndedError);
  // The next turn works as usual.
  const next = await Turn.begin(c, sid);
  await next.add({ id: "n", name: "nap", input: { delay: 0, label: "after" } });
  assert.equal((await next.drain()).results[0]!.content, "after\n");
  await c.closeSession(sid);
});

test("interrupt: cancel tools end as interrupted, in order", async () => {
  const { sessionId: sid } = await c.createSession();
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "i1", name: "bash", input: { command: "sleep 30" } });
  await turn.add({ id: "i2", name: "bash", input: { command: "echo queued" } });
  assert.deepEqual(await turn.interrupt(), { turn: 1 });
  const out = await turn.drain();
  assert.deepEqual(out.tools.map((t) => t.meta.reason), ["interrupted", "interrupted"]);
  await c.closeSession(sid);
});
