// Client-run tools (runner: "client") served by Client.serve, against the
// real daemon: ordering with process tools, progress, content blocks,
// thrown errors, cancellation, claims and take-over, a reconnect in the
// middle of a call.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type * as net from "node:net";
import { after, before, test } from "node:test";
import { deflateSync } from "node:zlib";
import {
  Client,
  StateConflictError,
  ToolCancelledError,
  Turn,
  contentImages,
  contentText,
  imageBlock,
  imageMediaType,
  textBlock,
  type Notification,
  type ToolDef,
  type ToolResultParams,
} from "../src/index.js";
import { Daemon, until, scaled } from "./daemon.js";

let d: Daemon;

before(async () => {
  d = await Daemon.start("--client-tool-grace-ms", String(scaled(3000)));
});

after(async () => {
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

const todoWrite: ToolDef = {
  name: "TodoWrite",
  description: "the model's todo list, kept by the frontend",
  runner: "client",
  inputSchema: { type: "object", properties: { todos: { type: "array" } }, required: ["todos"] },
};
const task: ToolDef = {
  name: "Task",
  description: "a subagent",
  runner: "client",
  concurrencySafe: true,
  interruptBehavior: "cancel",
  inputSchema: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
};

// A 2x2 RGB PNG, made here so that the test holds its own fixture.
function png(): Buffer {
  const crc = (b: Buffer): number => {
    let c = ~0;
    for (const x of b) {
      c ^= x;
      for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
    }
    return ~c >>> 0;
  };
  const chunk = (type: string, data: Buffer): Buffer => {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const tail = Buffer.alloc(4);
    tail.writeUInt32BE(crc(body));
    return Buffer.concat([head, body, tail]);
  };
  const ihdr = Buffer.from([0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0]);
  const rows = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(rows)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

function record(client: Client, sid: string): Notification[] {
  const seen: Notification[] = [];
  client.onNotification((n) => {
    if (n.params.sessionId === sid) seen.push(n);
  });
  return seen;
}

// Break the connection as a network failure would (not close()).
function cut(c: Client): void {
  (c as unknown as { sock: net.Socket }).sock.destroy();
}

function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

test("content helpers: media types by magic bytes, blocks, text", () => {
  const p = png();
  assert.equal(imageMediaType(p), "image/png");
  assert.equal(imageMediaType(Buffer.from([0xff, 0xd8, 0xff, 0xe0])), "image/jpeg");
  assert.equal(imageMediaType(Buffer.from("GIF89a....", "latin1")), "image/gif");
  assert.equal(imageMediaType(Buffer.from("RIFF\0\0\0\0WEBPVP8 ", "latin1")), "image/webp");
  assert.equal(imageMediaType(Buffer.from("plain text")), undefined);
  assert.throws(() => imageBlock(Buffer.from("plain text")), TypeError);
  const blocks = [textBlock("a plot:"), imageBlock(p)];
  assert.equal(contentText(blocks), "a plot:\n[image image/png]");
  assert.deepEqual(contentImages(blocks)[0]!.bytes, p);
  assert.equal(contentText("as is"), "as is");
});

test("an unsafe client tool between two bash calls holds the second; results in add order", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite], cwd: d.dir });
  const seen = record(c, sid);
  const started: string[] = [];
  const g = gate();
  await c.session(sid).serve({
    TodoWrite: async (input, ctx) => {
      started.push(ctx.toolUseId);
      assert.equal(ctx.resumed, false);
      assert.equal(ctx.name, "TodoWrite");
      await ctx.progress({ step: "saving", todos: (input.todos as unknown[]).length });
      await g.wait;
      return `saved ${(input.todos as unknown[]).length} todos`;
    },
  });
  assert.deepEqual(c.servedNames(sid), ["TodoWrite"]);
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "b1", name: "bash", input: { command: "echo one" } });
  await turn.add({ id: "t1", name: "TodoWrite", input: { todos: [{ content: "x" }, { content: "y" }] } });
  await turn.add({ id: "b2", name: "bash", input: { command: "echo two > two.txt; echo two" } });
  await until(() => started.length === 1);
  // The todo list runs alone (unsafe): the second bash has not started.
  await until(() => seen.some((n) => n.method === "progress" && n.params.toolUseId === "t1"));
  const st = await c.status(sid);
  assert.equal(st.tools.find((t) => t.id === "b2")!.status, "queued");
  g.open();
  const out = await turn.drain();
  assert.deepEqual(
    out.tools.map((t) => [t.toolUseId, contentText(t.result.content), t.result.is_error]),
    [
      ["b1", "one\n", false],
      ["t1", "saved 2 todos", false],
      ["b2", "two\n", false],
    ],
  );
  const progress = seen.find((n) => n.method === "progress" && n.params.toolUseId === "t1");
  assert.deepEqual(progress?.method === "progress" && progress.params.data, { step: "saving", todos: 2 });
  assert.equal(readFileSync(`${d.dir}/two.txt`, "utf8"), "two\n");
  await c.closeSession(sid);
  c.close();
});

test("two safe client tools run side by side with two read_files", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [task], cwd: d.dir });
  const running = new Set<string>();
  let most = 0;
  const g = gate();
  await c.serve(sid, {
    Task: async (input, ctx) => {
      running.add(ctx.toolUseId);
      most = Math.max(most, running.size);
      await g.wait;
      running.delete(ctx.toolUseId);
      return `done: ${String(input.prompt)}`;
    },
  });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "r1", name: "read_file", input: { file_path: "/etc/hostname" } });
  await turn.add({ id: "k1", name: "Task", input: { prompt: "one" } });
  await turn.add({ id: "k2", name: "Task", input: { prompt: "two" } });
  await turn.add({ id: "r2", name: "read_file", input: { file_path: "/etc/hostname" } });
  await until(() => running.size === 2);
  // The reads did not wait for the subagents: done (their results wait
  // for the subagents', in add order).
  for (;;) {
    const st = await c.status(sid);
    const status = Object.fromEntries(st.tools.map((t) => [t.id, t.status]));
    assert.equal(status.k1, "executing");
    assert.equal(status.k2, "executing");
    if (status.r2 === "completed") break;
    await new Promise((r) => setTimeout(r, 20));
  }
  g.open();
  const out = await turn.drain();
  assert.equal(most, 2);
  assert.deepEqual(out.tools.map((t) => t.toolUseId), ["r1", "k1", "k2", "r2"]);
  assert.deepEqual(out.results.slice(1, 3).map((r) => r.content), ["done: one", "done: two"]);
  await c.closeSession(sid);
  c.close();
});

test("a mixed text-and-image result arrives whole; a thrown error is an error result", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite, task] });
  const p = png();
  await c.serve(sid, {
    Task: () => [textBlock("the plot:"), imageBlock(p)],
    TodoWrite: () => {
      throw new Error("the todo list is locked");
    },
  });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "k", name: "Task", input: { prompt: "plot it" } });
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  const out = await turn.drain();
  const [k, t] = out.tools as [ToolResultParams, ToolResultParams];
  assert.equal(k.result.is_error, false);
  assert.deepEqual(k.result.content, [
    { type: "text", text: "the plot:" },
    { type: "image", source: { type: "base64", media_type: "image/png", data: p.toString("base64") } },
  ]);
  assert.deepEqual(contentImages(k.result.content)[0]!.bytes, p);
  assert.equal(t.result.is_error, true);
  assert.equal(t.result.content, "the todo list is locked");
  // {content, isError} says it outright.
  await c.serve(sid, { TodoWrite: () => ({ content: "refused", isError: true }) });
  const turn2 = await Turn.begin(c, sid);
  await turn2.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  const out2 = await turn2.drain();
  assert.deepEqual([out2.results[0]!.content, out2.results[0]!.is_error], ["refused", true]);
  await c.closeSession(sid);
  c.close();
});

test("read_file of a PNG gives an image block whose data is the file", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ cwd: d.dir });
  const p = png();
  const { writeFileSync } = await import("node:fs");
  writeFileSync(`${d.dir}/plot.png`, p);
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "r", name: "read_file", input: { file_path: `${d.dir}/plot.png` } });
  const out = await turn.drain();
  const imgs = contentImages(out.results[0]!.content);
  assert.equal(imgs.length, 1, JSON.stringify(out.results[0]));
  assert.equal(imgs[0]!.mediaType, "image/png");
  assert.deepEqual(imgs[0]!.bytes, p);
  await c.closeSession(sid);
  c.close();
});

test("an interrupt cancels a cancel client tool at once: its signal fires", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [task] });
  let reason: unknown;
  let started = false;
  const refused: Error[] = [];
  await c.serve(
    sid,
    {
      Task: (_input, { signal }) =>
        new Promise((_resolve, reject) => {
          started = true;
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            reject(signal.reason as Error);
          });
        }),
    },
    { onError: (e) => refused.push(e) },
  );
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "k", name: "Task", input: { prompt: "forever" } });
  await until(() => started);
  const st = await c.status(sid);
  assert.equal(st.tools[0]!.status, "executing");
  await turn.interrupt("interrupt");
  const out = await turn.drain();
  assert.ok(reason instanceof ToolCancelledError);
  assert.equal((reason as ToolCancelledError).reason, "interrupt");
  assert.equal(out.tools[0]!.meta.reason, "interrupted");
  assert.equal(out.results[0]!.is_error, true);
  // The late completeTool's refusal after a cancel is expected, not reported.
  await c.ping();
  assert.deepEqual(refused, []);
  await c.closeSession(sid);
  c.close();
});

test("two connections cannot both serve a name; takeOver moves it", async () => {
  const a = await Client.connect(d.socket);
  const b = await Client.connect(d.socket);
  const { sessionId: sid } = await a.createSession({ tools: [todoWrite] });
  await a.serve(sid, { TodoWrite: () => "from a" });
  await assert.rejects(b.serve(sid, { TodoWrite: () => "from b" }), StateConflictError);
  assert.deepEqual(b.servedNames(sid), []);
  assert.deepEqual((await b.serve(sid, { TodoWrite: () => "from b" }, { takeOver: true })).names, ["TodoWrite"]);
  const turn = await Turn.begin(a, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  assert.equal((await turn.drain()).results[0]!.content, "from b");
  await a.closeSession(sid);
  a.close();
  b.close();
});

test("a call added before anyone serves waits for the claim", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite] });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [1] } });
  await c.serve(sid, { TodoWrite: (input) => `late claim, ${JSON.stringify(input)}` });
  assert.equal((await turn.drain()).results[0]!.content, 'late claim, {"todos":[1]}');
  await c.closeSession(sid);
  c.close();
});

test("a reconnect in the middle of a call claims again; the call runs once and its result is delivered once", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite] });
  let runs = 0;
  const g = gate();
  await c.serve(sid, {
    TodoWrite: async () => {
      runs++;
      await g.wait;
      return "after the break";
    },
  });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  await until(() => runs === 1);
  cut(c);
  await c.reconnect();
  // The daemon sent the pending call again (resumed): still running here.
  await c.ping();
  g.open();
  const out = await turn.drain();
  assert.equal(runs, 1);
  assert.equal(out.results[0]!.content, "after the break");
  const ev = await c.events(sid, { since: 0 });
  assert.equal(ev.notifications.filter((n) => n.method === "tool_result").length, 1);
  await c.closeSession(sid);
  c.close();
});

test("a new client claims the name of one that died: it gets the call with resumed", async () => {
  const a = await Client.connect(d.socket);
  const { sessionId: sid } = await a.createSession({ tools: [todoWrite] });
  let aRan = false;
  await a.serve(sid, {
    TodoWrite: () => {
      aRan = true;
      return new Promise(() => undefined);
    },
  });
  const w = await Client.connect(d.socket);
  const turn = await Turn.begin(w, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  await until(() => aRan);
  cut(a);
  const b = await Client.connect(d.socket);
  let resumed: boolean | undefined;
  await b.serve(sid, {
    TodoWrite: (_input, ctx) => {
      resumed = ctx.resumed;
      return "b finished it";
    },
  });
  const out = await turn.drain();
  assert.equal(resumed, true);
  assert.equal(out.results[0]!.content, "b finished it");
  await w.closeSession(sid);
  w.close();
  b.close();
});

test("with nobody claiming, a call ends after the grace with an error", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite] });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  const out = await turn.drain();
  assert.equal(out.results[0]!.is_error, true);
  assert.match(contentText(out.results[0]!.content), /no client serves TodoWrite/);
  await c.closeSession(sid);
  c.close();
});

test("the raw claim: serveTools, onServeNotification and completeTool by hand", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite] });
  const got: string[] = [];
  const stop = c.onServeNotification((n) => {
    if (n.method !== "tool_start") return;
    got.push(`${n.params.name} ${n.params.toolUseId} ${JSON.stringify(n.params.input)}`);
    void c.toolProgress(sid, n.params.toolUseId, { by: "hand" }).then(() =>
      c.completeTool(sid, n.params.toolUseId, [textBlock("by hand")]),
    );
  });
  assert.deepEqual(await c.serveTools(sid, ["TodoWrite"]), { names: ["TodoWrite"] });
  const turn = await Turn.begin(c, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  const out = await turn.drain();
  assert.deepEqual(got, ['TodoWrite t {"todos":[]}']);
  assert.deepEqual(out.results[0]!.content, [{ type: "text", text: "by hand" }]);
  stop();
  await c.closeSession(sid);
  c.close();
});

test("a result made while the connection is down is sent once the names are claimed again", async () => {
  const c = await Client.connect(d.socket);
  const { sessionId: sid } = await c.createSession({ tools: [todoWrite] });
  let runs = 0;
  const g = gate();
  const errors: Error[] = [];
  await c.serve(
    sid,
    {
      TodoWrite: async () => {
        runs++;
        await g.wait;
        return "made while away";
      },
    },
    { onError: (e) => errors.push(e) },
  );
  const w = await Client.connect(d.socket);
  const turn = await Turn.begin(w, sid);
  await turn.add({ id: "t", name: "TodoWrite", input: { todos: [] } });
  await until(() => runs === 1);
  cut(c);
  g.open();
  // The handler is done; its completeTool found no connection.
  await new Promise((r) => setTimeout(r, scaled(50)));
  await c.reconnect();
  const out = await turn.drain();
  assert.equal(runs, 1);
  assert.equal(out.results[0]!.content, "made while away");
  assert.deepEqual(errors, []);
  await w.closeSession(sid);
  w.close();
  c.close();
});
