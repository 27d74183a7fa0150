// An agent loop's tool step with the TypeScript client: read a streamed
// Messages API response (server-sent events), hand each tool_use block to
// stexecd the moment its JSON is complete in the stream, and print the next
// request's `user` message: every tool_result, in the order of the tool_use
// blocks. The twin of agent_loop.py (examples/README.md).
//
//   node dist/agent_loop.js [--socket PATH] [--cwd DIR] [--speed X]
//                           [--compare] STREAM.sse
//
// STREAM.sse is a recorded response (examples/streams/) replayed with its
// recorded timing, so tools really run while the rest of the message is
// still streaming. When an attempt breaks off (an `error` event, or the end
// of the file before `message_stop`) the turn is thrown away with `discard`
// and the retried response that follows in the file goes into a new turn.
//
// stdout: one line, the user message as JSON. stderr: a timeline, and with
// --compare one `timing {...}` line: when the last result was ready, against
// when it is ready if the same tools start only after message_stop.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Client, Turn, type Notification, type ToolResultBlock, type ToolUse } from "stexec";

// The top of this tree (dist/ is examples/dist/): where the recorded tools look.
const TOP = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

// ------------------------------------------------------------ the stream

interface SseEvent {
  t: number; // ms after the request was sent
  name: string;
  data: Record<string, any>;
}

/**
 * The events of a recorded stream. Server-sent events as the API sends
 * them; a comment `: t=MS` gives the time at which the next event arrives.
 */
function readSse(path: string): SseEvent[] {
  const events: SseEvent[] = [];
  let t = 0;
  let name: string | undefined;
  let data: string[] = [];
  for (const line of [...readFileSync(path, "utf-8").split(/\r?\n/), ""]) {
    if (line === "") {
      if (data.length > 0) events.push({ t, name: name ?? "message", data: JSON.parse(data.join("\n")) });
      name = undefined;
      data = [];
    } else if (line.startsWith(":")) {
      const comment = line.slice(1).trim();
      if (comment.startsWith("t=")) t = Number(comment.slice(2));
    } else {
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
  }
  return events;
}

/** The stream cut into attempts: an `error` event ends one, the retried response follows. */
function attempts(events: SseEvent[]): SseEvent[][] {
  const out: SseEvent[][] = [[]];
  for (const ev of events) {
    out[out.length - 1]!.push(ev);
    if (ev.data.type === "error") out.push([]);
  }
  return out.filter((a) => a.length > 0);
}

/** The timeline on stderr, in ms since the request was sent. */
class Log {
  private readonly t0 = performance.now();

  ms(): number {
    return Math.round(performance.now() - this.t0);
  }

  line(what: string): void {
    process.stderr.write(`[${String(this.ms()).padStart(6)} ms] ${what}\n`);
  }
}

/** Yield the events at their recorded times (`speed` 2: twice as fast, 0: no waiting). */
async function* replay(events: SseEvent[], speed: number, log: Log): AsyncGenerator<SseEvent> {
  for (const ev of events) {
    if (speed > 0) {
      const wait = ev.t / speed - log.ms();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    yield ev;
  }
}

function show(log: Log, n: Notification): void {
  if (n.method === "tool_status") log.line(`  ${n.params.toolUseId} ${n.params.status}`);
  else if (n.method === "progress") log.line(`  ${n.params.toolUseId} progress ${JSON.stringify(n.params.data).slice(0, 60)}`);
  else if (n.method === "tool_result")
    log.line(`  ${n.params.toolUseId} result: ${n.params.meta.reason}, ran ${n.params.meta.durationMs} ms`);
  else if (n.method === "permission_request") log.line(`  ${n.params.toolUseId} asks permission`);
}

// ------------------------------------------------------------ the turn

interface Block {
  type: string;
  id?: string;
  name?: string;
  text: string;
  json: string;
}

interface Completed {
  results: ToolResultBlock[];
  toolUses: ToolUse[];
  stopMs: number;
  lastResultMs: number | undefined;
}

/**
 * Replay one attempt of the request into a new turn. The user message's
 * results when the message completed; undefined when the stream broke off
 * and the turn was discarded.
 */
async function attempt(client: Client, sid: string, stream: AsyncIterable<SseEvent>, log: Log): Promise<Completed | undefined> {
  const turn = await Turn.begin(client, sid);
  let lastResultMs: number | undefined;
  // Show what the tools do while the stream goes on.
  const stopShowing = client.onNotification((n) => {
    if (n.params.sessionId !== sid || !("turn" in n.params) || n.params.turn !== turn.number) return;
    show(log, n);
    if (n.method === "tool_result") lastResultMs = log.ms();
  });
  try {
    const blocks = new Map<number, Block>();
    const toolUses: ToolUse[] = [];
    for await (const { data } of stream) {
      if (data.type === "message_start") {
        log.line(`message_start ${data.message.id}`);
      } else if (data.type === "content_block_start") {
        blocks.set(data.index, { text: "", ...data.content_block, json: "" });
      } else if (data.type === "content_block_delta") {
        const b = blocks.get(data.index)!;
        if (data.delta.type === "text_delta") b.text += data.delta.text;
        else if (data.delta.type === "input_json_delta") b.json += data.delta.partial_json;
      } else if (data.type === "content_block_stop") {
        const b = blocks.get(data.index)!;
        blocks.delete(data.index);
        if (b.type === "text") {
          log.line(`text: ${b.text.slice(0, 70)}`);
        } else if (b.type === "tool_use") {
          // Complete: hand it over now; the daemon starts it as early as safety allows.
          const block = { type: "tool_use", id: b.id!, name: b.name!, input: JSON.parse(b.json || "{}") };
          toolUses.push(block);
          const res = await turn.add(block);
          log.line(`tool_use ${block.id} ${block.name} -> addTool: ${res.status}`);
        }
      } else if (data.type === "message_delta") {
        log.line(`stop_reason ${data.delta.stop_reason}`);
      } else if (data.type === "message_stop") {
        log.line("message_stop");
        const stopMs = log.ms();
        const outcome = await turn.drain();
        return { results: outcome.results, toolUses, stopMs, lastResultMs };
      } else if (data.type === "error") {
        log.line(`stream error: ${data.error.message}`);
        break;
      }
    }
    // Broken off: throw the turn away. Nothing more of it is delivered, its
    // tools that can be killed are; the retry starts a clean turn.
    const res = await turn.discard();
    log.line(`discard: turn ${res.discardedTurn} thrown away`);
    return undefined;
  } finally {
    stopShowing();
  }
}

/**
 * The same tools added only once the message is complete, the way a
 * frontend without streaming runs them: ms from adding to the last result.
 */
async function afterStop(client: Client, sid: string, toolUses: ToolUse[]): Promise<number> {
  const turn = await Turn.begin(client, sid);
  const t0 = performance.now();
  for (const t of toolUses) await turn.add(t);
  await turn.drain();
  return Math.round(performance.now() - t0);
}

// ------------------------------------------------------------ main

const USAGE = "usage: agent_loop [--socket PATH] [--cwd DIR] [--speed X] [--compare] STREAM.sse";

interface Args {
  stream: string;
  socket?: string;
  cwd: string;
  speed: number;
  compare: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Partial<Args> = { cwd: TOP, speed: 1, compare: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value\n${USAGE}`);
      return argv[++i]!;
    };
    if (a === "--socket") args.socket = value();
    else if (a === "--cwd") args.cwd = value();
    else if (a === "--speed") args.speed = Number(value());
    else if (a === "--compare") args.compare = true;
    else if (a.startsWith("-") || args.stream !== undefined) throw new Error(`unexpected ${a}\n${USAGE}`);
    else args.stream = a;
  }
  if (args.stream === undefined) throw new Error(USAGE);
  if (!(args.speed! >= 0)) throw new Error(`--speed: a number >= 0\n${USAGE}`);
  return args as Args;
}

async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  const events = readSse(args.stream);
  const client = await Client.connect(args.socket === undefined ? {} : { path: args.socket });
  let sid: string | undefined;
  try {
    sid = (await client.createSession({ cwd: resolve(args.cwd) })).sessionId;
    const log = new Log();
    let done: Completed | undefined;
    for (const [n, evs] of attempts(events).entries()) {
      if (n > 0) log.line("retrying: the response that follows in the stream");
      done = await attempt(client, sid, replay(evs, args.speed, log), log);
      if (done !== undefined) break;
    }
    if (done === undefined) {
      process.stderr.write(`${args.stream}: the stream broke off and no retry follows\n`);
      return 1;
    }
    process.stdout.write(JSON.stringify({ role: "user", content: done.results }) + "\n");

    if (args.compare) {
      const took = await afterStop(client, sid, done.toolUses);
      const last = done.lastResultMs ?? done.stopMs;
      const timing = {
        messageStopMs: done.stopMs,
        lastResultMs: last,
        afterStopLastResultMs: done.stopMs + took,
        soonerMs: done.stopMs + took - last,
      };
      process.stderr.write(`timing ${JSON.stringify(timing)}\n`);
    }
    return 0;
  } finally {
    // Closing the session kills what is still running in it (on an error).
    if (sid !== undefined) await client.closeSession(sid).catch(() => undefined);
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (rc) => (process.exitCode = rc),
  (err: Error) => {
    process.stderr.write(`agent_loop: ${err.message}\n`);
    process.exitCode = 1;
  },
);
