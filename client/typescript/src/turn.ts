// The frontend pattern for one LLM call: add each tool_use block the moment
// the stream has parsed it, take results in add order as they come, drain
// when the model's message is complete.
import type { Client } from "./client.js";
import { ConnectionLostError, DuplicateToolUseError, TurnEndedError } from "./errors.js";
import type {
  AbortResult,
  AddToolResult,
  DiscardResult,
  Notification,
  ToolResultBlock,
  ToolResultParams,
  ToolUse,
} from "./protocol.js";

// One tool of the turn: its result, once it comes.
interface Slot {
  promise: Promise<ToolResultParams>;
  resolve(r: ToolResultParams): void;
  reject(e: Error): void;
  done: boolean;
}

function slot(): Slot {
  let resolve!: (r: ToolResultParams) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<ToolResultParams>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody may ask for a discarded tool's result: that is not unhandled.
  promise.catch(() => undefined);
  const s: Slot = {
    promise,
    resolve: (r) => {
      s.done = true;
      resolve(r);
    },
    reject: (e) => {
      s.done = true;
      reject(e);
    },
    done: false,
  };
  return s;
}

/** What a drained turn delivered. */
export interface TurnOutcome {
  turn: number;
  /** The tool_result blocks in add order, paste-ready for the next model request. */
  results: ToolResultBlock[];
  /** The full tool_result params (meta included), in add order. */
  tools: ToolResultParams[];
}

export class Turn {
  /** The turn's number in its session. */
  readonly number: number;
  private readonly ids: string[] = [];
  private readonly slots = new Map<string, Slot>();
  private readonly stopListening: () => void;
  private ended: "drained" | "discarded" | "session_closed" | undefined;
  private outcome: TurnOutcome | undefined;
  private endSeen: () => void = () => undefined;
  private readonly turnEnd: Promise<void>;
  // Settles (and is renewed) when a tool is added or the turn ends.
  private changed!: Promise<void>;
  private notifyChanged!: () => void;
  // A drain was cut off by a lost connection: the turn may have ended since.
  private drainLost = false;
  // Ids whose addTool was cut off: the daemon may or may not have them.
  private readonly unsure = new Set<string>();

  private constructor(
    readonly client: Client,
    readonly sessionId: string,
    number: number,
  ) {
    this.number = number;
    this.turnEnd = new Promise((resolve) => (this.endSeen = resolve));
    this.renew();
    this.stopListening = client.onNotification((n) => this.see(n));
  }

  /**
   * Start using the session's current turn: follows the session first
   * (resuming from what the client has) so every result reaches it.
   */
  static async begin(client: Client, sessionId: string): Promise<Turn> {
    await client.follow(sessionId);
    const { turn } = await client.status(sessionId);
    return new Turn(client, sessionId, turn);
  }

  private renew(): void {
    this.changed = new Promise((resolve) => (this.notifyChanged = resolve));
  }

  private wake(): void {
    const notify = this.notifyChanged;
    this.renew();
    notify();
  }

  private see(n: Notification): void {
    if (n.params.sessionId !== this.sessionId) return;
    if (n.method === "tool_result" && n.params.turn === this.number) {
      const s = this.slots.get(n.params.toolUseId);
      if (s !== undefined && !s.done) s.resolve(n.params);
    } else if (n.method === "turn_end" && n.params.turn === this.number) {
      this.end(n.params.reason);
    } else if (n.method === "session_closed") {
      this.end("session_closed");
    }
  }

  private end(reason: "drained" | "discarded" | "session_closed"): void {
    if (this.ended !== undefined) return;
    this.ended = reason;
    if (reason !== "drained") {
      const err = new TurnEndedError(
        reason,
        reason === "discarded" ? `turn ${this.number} was discarded` : `session ${this.sessionId} was closed`,
      );
      for (const s of this.slots.values()) if (!s.done) s.reject(err);
    }
    this.stopListening();
    this.endSeen();
    this.wake();
  }

  /**
   * Add a tool_use block ({id, name, input}) the moment it is parsed; it
   * starts as early as the safety rules allow. Its result: result(id).
   * After a ConnectionLostError, reconnect() and add the same block again:
   * whether or not the daemon had it, it is in the turn once.
   */
  async add(toolUse: ToolUse): Promise<AddToolResult> {
    if (this.ended !== undefined) throw new Error(`turn ${this.number} is over (${this.ended}); begin a new Turn`);
    const again = this.unsure.delete(toolUse.id);
    if (!again) {
      if (this.slots.has(toolUse.id)) throw new Error(`tool use id ${toolUse.id} was already added to this turn`);
      // Registered before the request: its result may come before the reply.
      this.slots.set(toolUse.id, slot());
      this.ids.push(toolUse.id);
      this.wake();
    }
    try {
      return await this.client.addTool(this.sessionId, toolUse);
    } catch (err) {
      if (err instanceof ConnectionLostError) {
        this.unsure.add(toolUse.id);
        throw err;
      }
      if (again && err instanceof DuplicateToolUseError) {
        // The first add was applied before the connection broke (§2).
        const st = await this.client.status(this.sessionId);
        const t = st.tools.find((x) => x.id === toolUse.id);
        if (st.turn === this.number && t !== undefined)
          return { toolUseId: t.id, turn: st.turn, status: t.status, concurrencySafe: t.concurrencySafe };
      }
      // Not added (unknown session, limit, ...): it gets no result.
      this.slots.get(toolUse.id)!.reject(err as Error);
      this.slots.delete(toolUse.id);
      this.ids.splice(this.ids.indexOf(toolUse.id), 1);
      throw err;
    }
  }

  /** The tool's result (params of its tool_result, meta included). */
  result(toolUseId: string): Promise<ToolResultParams> {
    const s = this.slots.get(toolUseId);
    if (s === undefined) return Promise.reject(new Error(`no tool ${toolUseId} in this turn`));
    return s.promise;
  }

  /**
   * Every tool's result in add order, each as soon as it and those before
   * it are in; tools added while iterating are included. Ends when the turn
   * has ended and all were given.
   */
  async *results(): AsyncGenerator<ToolResultParams, void, undefined> {
    for (let i = 0; ; ) {
      if (i < this.ids.length) {
        yield await this.slots.get(this.ids[i++]!)!.promise;
      } else if (this.ended !== undefined) {
        return;
      } else {
        await this.changed;
      }
    }
  }

  /** The user pressed Esc ("interrupt") or wants everything killed ("cancel"). */
  interrupt(reason: "interrupt" | "cancel" = "interrupt"): Promise<AbortResult> {
    return this.client.abort(this.sessionId, reason);
  }

  /** Throw the turn away: no more of its results; pending result()s reject. */
  async discard(): Promise<DiscardResult> {
    const res = await this.client.discard(this.sessionId);
    await this.turnEnd;
    return res;
  }

  /**
   * The model's message is complete: wait for every result of the turn and
   * end it. After a ConnectionLostError, reconnect() the client and call
   * drain() again: it does not drain the next turn by mistake.
   */
  async drain(): Promise<TurnOutcome> {
    if (this.outcome !== undefined) return this.outcome;
    if (this.ended === undefined) {
      // Ended while we were away? Then its turn_end is on its way in the replay.
      const current = this.drainLost ? (await this.client.status(this.sessionId)).turn : this.number;
      if (current === this.number) {
        try {
          await this.client.drain(this.sessionId);
        } catch (err) {
          if (err instanceof ConnectionLostError) this.drainLost = true;
          throw err;
        }
      }
      await this.turnEnd;
    }
    if (this.ended !== "drained")
      throw new TurnEndedError(this.ended === "discarded" ? "discarded" : "session_closed", `turn ${this.number} ended: ${this.ended}`);
    const tools = await Promise.all(this.ids.map((id) => this.slots.get(id)!.promise));
    this.outcome = { turn: this.number, results: tools.map((t) => t.result), tools };
    return this.outcome;
  }

  /** Stop following the session (only needed for a turn never drained nor discarded). */
  dispose(): void {
    this.stopListening();
  }
}
