// Resume after a broken connection: reconnect() resubscribes with `since`,
// the notification stream goes on with no gap and no duplicate, and a
// drain cut off by the break neither hangs nor drains the next turn.
import assert from "node:assert/strict";
import type * as net from "node:net";
import { after, before, test } from "node:test";
import { Client, ConnectionLostError, Turn, type Notification, type ToolDef } from "../src/index.js";
import { Daemon, scaled } from "./daemon.js";

let d: Daemon;

// Ten progress ticks, 100 ms apart: notifications flow while the client is away.
const ticker: ToolDef = {
  name: "ticker",
  command: ["/bin/sh", "-c", 'for i in 1 2 3 4 5 6 7 8 9 10; do printf \'{"progress":{"tick":%s}}\\n\' $i >&3; sleep 0.1; done; echo ticked'],
};

before(async () => {
  d = await Daemon.start();
});

after(async () => {
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

// Break the connection as a network failure would (not close()).
function cut(c: Client): void {
  (c as unknown as { sock: net.Socket }).sock.destroy();
}

function assertComplete(notes: Notification[], last: number): void {
  assert.deepEqual(
    notes.map((n) => n.params.seq),
    Array.from({ length: last }, (_, i) => i + 1),
    "every seq once, in order",
  );
}

test("the iterator throws on a break; after reconnect it goes on with nothing lost or repeated", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [ticker] });
  // Kept for the iterator from now on, though Turn itself needs no queue.
  const it = c.notifications(sid);
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t", name: "ticker", input: {} });

  const got: Notification[] = [];
  for await (const n of it) {
    got.push(n);
    if (got.filter((g) => g.method === "progress").length === 3) break;
  }
  const drain = turn.drain();
  cut(c);
  await assert.rejects(drain, ConnectionLostError);
  await assert.rejects(c.notifications(sid).next(), ConnectionLostError);
  assert.equal(c.connected, false);
  // The tool goes on meanwhile.
  await new Promise((r) => setTimeout(r, scaled(400)));

  await c.reconnect();
  assert.equal(c.connected, true);
  const outcome = await turn.drain();
  assert.equal(outcome.results[0]!.content, "ticked\n");
  for await (const n of c.notifications(sid)) {
    got.push(n);
    if (n.method === "turn_end") break;
  }
  // Moving the subscription back replays it all again (§3.8): dropped.
  await c.subscribe(sid, 0);
  await c.ping();
  const probe = c.notifications(sid);
  assert.equal(await Promise.race([probe.next(), new Promise((r) => setTimeout(() => r("none"), scaled(200)))]), "none");
  await probe.return!();
  const last = got.at(-1)!.params.seq;
  assertComplete(got, last);
  assert.equal(got.filter((n) => n.method === "progress").length, 10);
  // The same as the daemon's own log of the session.
  assert.deepEqual((await c.events(sid, { since: 0 })).notifications, got);
  assert.equal(c.lastSeq(sid), last);
  await c.closeSession(sid);
  c.close();
});

test("a turn that ended while away: drain() again returns it and leaves the next turn alone", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [ticker] });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t1", name: "ticker", input: {} });
  await turn.add({ id: "t2", name: "bash", input: { command: "echo two" } });
  const drain = turn.drain();
  // The drain request is written; break before its answer.
  await new Promise((r) => setTimeout(r, scaled(100)));
  cut(c);
  await assert.rejects(drain, ConnectionLostError);
  // Wait (on another connection) until the turn is over.
  const watcher = await Client.connect(d.socket);
  for (;;) {
    const { sessions } = await watcher.listSessions();
    if (sessions.find((s) => s.sessionId === sid)!.turn === 2) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await c.reconnect();
  const outcome = await turn.drain();
  assert.equal(outcome.turn, 1);
  assert.deepEqual(outcome.results.map((r) => r.content), ["ticked\n", "two\n"]);
  // Turn 2 was not drained by the retry.
  const st = await c.status(sid);
  assert.equal(st.turn, 2);
  const ev = await c.events(sid, { since: 0 });
  assert.deepEqual(
    ev.notifications.filter((n) => n.method === "turn_end").map((n) => n.params.turn),
    [1],
  );
  watcher.close();
  await c.closeSession(sid);
  c.close();
});

test("close() ends iterators; a session's iterator ends after session_closed", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession();
  await c.subscribe(sid);
  const all: Notification[] = [];
  const reading = (async () => {
    for await (const n of c.notifications(sid)) all.push(n);
  })();
  await c.closeSession(sid);
  await reading;
  assert.deepEqual(all.map((n) => n.method), ["session_closed"]);
  const waiting = c.notifications().next();
  c.close();
  assert.deepEqual(await waiting, { value: undefined, done: true });
});

test("an add cut off by a break is added again after reconnect, once, either way", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession();
  const turn = await Turn.begin(c, sid);
  // The daemon never saw it: the connection was already down.
  cut(c);
  await assert.rejects(turn.add({ id: "a", name: "bash", input: { command: "echo a" } }), ConnectionLostError);
  await c.reconnect();
  assert.equal((await turn.add({ id: "a", name: "bash", input: { command: "echo a" } })).turn, 1);
  // The daemon had it, but the answer was lost.
  await turn.add({ id: "b", name: "bash", input: { command: "echo b" } });
  (turn as unknown as { unsure: Set<string> }).unsure.add("b");
  const again = await turn.add({ id: "b", name: "bash", input: { command: "echo b" } });
  assert.equal(again.toolUseId, "b");
  assert.equal(again.turn, 1);
  // Not unsure: a real duplicate is refused.
  await assert.rejects(turn.add({ id: "b", name: "bash", input: { command: "echo b" } }), /already added/);
  const out = await turn.drain();
  assert.deepEqual(out.results.map((r) => r.content), ["a\n", "b\n"]);
  await c.closeSession(sid);
  c.close();
});
