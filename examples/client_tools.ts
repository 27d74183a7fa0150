// Tools the frontend runs, in the daemon's one executor, with the
// TypeScript client: the twin of client_tools.py (examples/README.md).
// `Task` (a subagent) and `TodoWrite` are ToolDefs with runner "client",
// served by this process (`session.serve`); `bash` and `read_file` (one of
// them on a PNG image) are run by stexecd. Each tool_use block is handed
// over the moment it is complete in the streamed message; the results come
// back in the order of the blocks.
//
//   node dist/client_tools.js [--socket PATH] [--cwd DIR] [--speed X]
//                             [--interrupt] [STREAM.sse]
//
// STREAM.sse (default client_tools/message.sse) is the model's message,
// replayed with its recorded timing. The session's directory (--cwd,
// default a new temporary one) gets notes.txt and plot.png, a small PNG
// made here. --interrupt: Esc once the subagent has started; its handler's
// signal fires (tool_cancel, reason "interrupt").
//
// stdout: one line, the next request's user message. stderr: a timeline.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { deflateSync } from "node:zlib";
import {
  Client,
  ToolCancelledError,
  Turn,
  contentImages,
  textBlock,
  type Notification,
  type ToolCallContext,
  type ToolDef,
  type ToolResultContent,
} from "stexec";

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const TODO_WRITE: ToolDef = {
  name: "TodoWrite",
  description: "Create and update the session's todo list.",
  runner: "client",
  inputSchema: {
    type: "object",
    properties: {
      todos: {
        type: "array",
        items: {
          type: "object",
          properties: {
            content: { type: "string", minLength: 1 },
            status: { enum: ["pending", "in_progress", "completed"] },
            activeForm: { type: "string", minLength: 1 },
          },
          required: ["content", "status", "activeForm"],
        },
      },
    },
    required: ["todos"],
  },
  // Unsafe (the default): it runs alone, after what came before it.
};
const TASK: ToolDef = {
  name: "Task",
  description: "Launch a subagent for a task of several steps.",
  runner: "client",
  inputSchema: {
    type: "object",
    properties: { description: { type: "string" }, prompt: { type: "string" }, subagent_type: { type: "string" } },
    required: ["description", "prompt"],
  },
  // Subagents run beside reads, and Esc stops them.
  concurrencySafe: true,
  interruptBehavior: "cancel",
};

const NOTES =
  "stexec runs every tool of a model's message in one executor.\n" +
  "Tools the frontend keeps, like subagents and the todo list,\n" +
  "are scheduled with the daemon's own.\n";

/** A small valid PNG: an RGB gradient, deflated. */
function plotPng(width = 48, height = 32): Buffer {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer): number => {
    let c = 0xffffffff;
    for (const x of b) c = table[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (kind: string, data: Buffer): Buffer => {
    const body = Buffer.concat([Buffer.from(kind, "latin1"), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const rows: number[] = [];
  for (let y = 0; y < height; y++) {
    rows.push(0);
    for (let x = 0; x < width; x++)
      rows.push(Math.floor((x * 255) / (width - 1)), Math.floor((y * 255) / (height - 1)), 160);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(Buffer.from(rows), { level: 9 })),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

// ------------------------------------------------------------ the stream

interface SseEvent {
  t: number;
  data: Record<string, any>;
}

/** Server-sent events as the API sends them; `: t=MS` says when the next one arrives. */
function readSse(path: string): SseEvent[] {
  const events: SseEvent[] = [];
  let t = 0;
  let data: string[] = [];
  for (const line of [...readFileSync(path, "utf-8").split(/\r?\n/), ""]) {
    if (line === "") {
      if (data.length > 0) events.push({ t, data: JSON.parse(data.join("\n")) });
      data = [];
    } else if (line.startsWith(":")) {
      const comment = line.slice(1).trim();
      if (comment.startsWith("t=")) t = Number(comment.slice(2));
    } else if (line.startsWith("data:")) {
      data.push(line.slice(5).replace(/^ /, ""));
    }
  }
  return events;
}

class Log {
  private readonly t0 = performance.now();

  ms(): number {
    return Math.round(performance.now() - this.t0);
  }

  line(what: string): void {
    process.stderr.write(`[${String(this.ms()).padStart(6)} ms] ${what}\n`);
  }
}

/** A result's content in one line: text cut short, images by size. */
function describe(content: ToolResultContent): string {
  const cut = (s: string): string => JSON.stringify(s.length > 60 ? s.slice(0, 60) + "…" : s);
  if (typeof content === "string") return cut(content);
  const parts = content.flatMap((b) => (b.type === "text" ? [`text ${cut(b.text)}`] : []));
  for (const img of contentImages(content)) parts.push(`image ${img.mediaType}, ${img.bytes.length} bytes`);
  return `[${parts.join("; ")}]`;
}

// ------------------------------------------------------------ the frontend's tools

class Frontend {
  todos: Array<{ content: string; status: string }> = [];
  subagentStarted!: Promise<void>;
  private started!: () => void;

  constructor(
    private readonly log: Log,
    private readonly cwd: string,
  ) {
    this.subagentStarted = new Promise((r) => (this.started = r));
  }

  todoWrite = async (input: Record<string, unknown>, call: ToolCallContext): Promise<string> => {
    this.todos = input.todos as Array<{ content: string; status: string }>;
    this.log.line(`  ${call.toolUseId} TodoWrite: ${this.todos.map((t) => `${t.content} (${t.status})`).join(", ")}`);
    return "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.";
  };

  /** A subagent, played here: it works a while, reporting progress; Esc stops it. */
  task = async (input: Record<string, unknown>, call: ToolCallContext): Promise<ToolResultContent> => {
    this.log.line(`  ${call.toolUseId} Task started here: ${String(input.description)}`);
    this.started();
    const sleep = (ms: number): Promise<void> =>
      new Promise((resolve, reject) => {
        if (call.signal.aborted) return reject(call.signal.reason as Error);
        const timer = setTimeout(resolve, ms);
        call.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(call.signal.reason as Error);
        });
      });
    try {
      await call.progress({ subagent: "reading notes.txt" });
      const lines = readFileSync(join(this.cwd, "notes.txt"), "utf-8").split("\n").filter((l) => l !== "");
      await sleep(400);
      await call.progress({ subagent: "summarizing" });
      await sleep(400);
      return [textBlock(`Summary of notes.txt (${lines.length} lines): ${lines[0]}`)];
    } catch (err) {
      if (err instanceof ToolCancelledError) this.log.line(`  ${call.toolUseId} Task cancelled here: ${err.reason}`);
      throw err;
    }
  };
}

// ------------------------------------------------------------ the turn

async function run(client: Client, sid: string, events: SseEvent[], speed: number, interrupt: boolean, log: Log, frontend: Frontend) {
  const turn = await Turn.begin(client, sid);
  const names = new Map<string, string>();
  const stopShowing = client.onNotification((n: Notification) => {
    if (n.params.sessionId !== sid) return;
    if (n.method === "tool_result")
      log.line(`  ${n.params.toolUseId} result (${names.get(n.params.toolUseId) ?? "?"}): ${n.params.meta.reason}, ${describe(n.params.result.content)}`);
    else if (n.method === "progress") log.line(`  ${n.params.toolUseId} progress ${JSON.stringify(n.params.data)}`);
  });
  if (interrupt)
    void frontend.subagentStarted.then(async () => {
      await new Promise((r) => setTimeout(r, 100));
      log.line("Esc: the user interrupts");
      await turn.interrupt();
    });
  const blocks = new Map<number, { type: string; id?: string; name?: string; text: string; json: string }>();
  for (const ev of events) {
    if (speed > 0) {
      const wait = ev.t / speed - log.ms();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    const d = ev.data;
    if (d.type === "message_start") log.line(`message_start ${d.message.id}`);
    else if (d.type === "content_block_start") blocks.set(d.index, { text: "", ...d.content_block, json: "" });
    else if (d.type === "content_block_delta") {
      const b = blocks.get(d.index)!;
      if (d.delta.type === "text_delta") b.text += d.delta.text;
      else if (d.delta.type === "input_json_delta") b.json += d.delta.partial_json;
    } else if (d.type === "content_block_stop") {
      const b = blocks.get(d.index)!;
      blocks.delete(d.index);
      if (b.type === "text") log.line(`text: ${b.text.slice(0, 70)}`);
      else if (b.type === "tool_use") {
        // Complete: hand it over now, whoever runs it.
        names.set(b.id!, b.name!);
        const res = await turn.add({ id: b.id!, name: b.name!, input: JSON.parse(b.json || "{}") });
        log.line(`tool_use ${b.id} ${b.name} -> addTool: ${res.status}`);
      }
    } else if (d.type === "message_stop") {
      log.line("message_stop");
      break;
    } else if (d.type === "error") throw new Error(`the stream broke off: ${JSON.stringify(d)}`);
  }
  const outcome = await turn.drain();
  stopShowing();
  return outcome;
}

const USAGE = "usage: client_tools [--socket PATH] [--cwd DIR] [--speed X] [--interrupt] [STREAM.sse]";

async function main(argv: string[]): Promise<number> {
  let socket: string | undefined;
  let cwdArg: string | undefined;
  let speed = 1;
  let interrupt = false;
  let stream = join(HERE, "client_tools", "message.sse");
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value\n${USAGE}`);
      return argv[++i]!;
    };
    if (a === "--socket") socket = value();
    else if (a === "--cwd") cwdArg = value();
    else if (a === "--speed") speed = Number(value());
    else if (a === "--interrupt") interrupt = true;
    else if (a.startsWith("-")) throw new Error(`unknown option ${a}\n${USAGE}`);
    else stream = a;
  }
  const events = readSse(stream);
  const cwd = cwdArg !== undefined ? resolve(cwdArg) : mkdtempSync(join(tmpdir(), "stexec-client-tools-"));
  writeFileSync(join(cwd, "notes.txt"), NOTES);
  writeFileSync(join(cwd, "plot.png"), plotPng());
  const client = await Client.connect(socket === undefined ? {} : { path: socket });
  try {
    const { sessionId } = await client.createSession({ tools: [TODO_WRITE, TASK], cwd });
    const log = new Log();
    const frontend = new Frontend(log, cwd);
    // Claim the frontend's tools: their tool_starts come here.
    await client.session(sessionId).serve({ TodoWrite: frontend.todoWrite, Task: frontend.task });
    const outcome = await run(client, sessionId, events, speed, interrupt, log, frontend);
    process.stdout.write(JSON.stringify({ role: "user", content: outcome.results }) + "\n");
    await client.closeSession(sessionId);
  } finally {
    client.close();
    if (cwdArg === undefined) rmSync(cwd, { recursive: true, force: true });
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
