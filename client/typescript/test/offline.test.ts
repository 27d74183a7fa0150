// What needs no daemon: the socket rules, the connect errors, the error
// classes, and that the client keeps up with the schemas' method list.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as net from "node:net";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  Client,
  ConnectError,
  ErrorCode,
  InvalidParamsError,
  LimitExceededError,
  ReplayGapError,
  RUN_SOCKET,
  StexecError,
  connectSocket,
  defaultSocketPath,
  errorCodes,
  methodNames,
} from "../src/index.js";

test("default socket: $STEXEC_SOCKET, then $XDG_RUNTIME_DIR, then /run", () => {
  assert.equal(defaultSocketPath({ STEXEC_SOCKET: "/x/s", XDG_RUNTIME_DIR: "/r" }), "/x/s");
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: "/run/user/7" }), "/run/user/7/stexec/stexecd.sock");
  assert.equal(defaultSocketPath({ STEXEC_SOCKET: "", XDG_RUNTIME_DIR: "" }), "/run/stexec/stexecd.sock");
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: "run/user/7" }), "/run/stexec/stexecd.sock");
  assert.equal(defaultSocketPath({}), RUN_SOCKET);
});

test("connect errors say what to do", async () => {
  const dir = mkdtempSync(join(tmpdir(), "stexec-ts-off-"));
  try {
    const missing = join(dir, "none", "s.sock");
    await assert.rejects(connectSocket(missing, {}), (e: unknown) => {
      assert.ok(e instanceof ConnectError);
      assert.equal(e.path, missing);
      assert.match(e.message, new RegExp(`^cannot connect to ${missing}: ENOENT — is stexecd running\\? Start it with: stexecd --socket ${missing}$`));
      return true;
    });
    // By default from $XDG_RUNTIME_DIR, the system daemon is tried next:
    // here at a path of the test's own, never the machine's /run/stexec.
    const system = join(dir, "system.sock");
    const env = { XDG_RUNTIME_DIR: dir, STEXEC_FALLBACK_SOCKET: system };
    await assert.rejects(connectSocket(undefined, env), (e: unknown) => {
      assert.ok(e instanceof ConnectError);
      assert.equal(e.path, `${dir}/stexec/stexecd.sock`);
      assert.match(e.message, new RegExp(`\\(nor ${system}\\): ENOENT .* Start it with: stexecd$`));
      return true;
    });
    // And reached when a daemon listens there.
    const server = net.createServer((s) => s.end());
    await new Promise<void>((resolve) => server.listen(system, resolve));
    try {
      const got = await connectSocket(undefined, env);
      assert.equal(got.path, system);
      got.socket.destroy();
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    // $STEXEC_SOCKET is final: no fallback.
    const fromEnv = join(dir, "env.sock");
    await assert.rejects(connectSocket(undefined, { STEXEC_SOCKET: fromEnv }), (e: unknown) => {
      assert.ok(e instanceof ConnectError);
      assert.doesNotMatch(e.message, /nor/);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("a class per error code of error.schema.json", () => {
  const names = new Set<string>();
  for (const code of errorCodes) {
    const e = StexecError.from({ code, message: "m", data: { field: "f" } }, "ping");
    assert.ok(e instanceof StexecError);
    assert.notEqual(e.constructor, StexecError, `no class for ${code}`);
    assert.equal(e.code, code);
    assert.equal(e.method, "ping");
    assert.equal(e.name, e.constructor.name);
    names.add(e.name);
  }
  assert.equal(names.size, errorCodes.length);
  assert.deepEqual([...errorCodes].sort(), Object.values(ErrorCode).sort());
  const field = StexecError.from({ code: -32602, message: "Invalid params: x: bad", data: { field: "x" } });
  assert.ok(field instanceof InvalidParamsError);
  assert.equal(field.field, "x");
  const gap = StexecError.from({ code: -32004, message: "Replay gap", data: { oldestSeq: 7 } });
  assert.ok(gap instanceof ReplayGapError && gap instanceof LimitExceededError);
  assert.equal(gap.oldestSeq, 7);
  assert.ok(!(StexecError.from({ code: -32004, message: "Limit exceeded: x" }) instanceof ReplayGapError));
  // A code from a newer daemon is still a StexecError.
  assert.equal(StexecError.from({ code: -32099, message: "new" }).constructor, StexecError);
});

test("a typed method for every method of request.schema.json", () => {
  const proto = Client.prototype as unknown as Record<string, unknown>;
  for (const m of methodNames) assert.equal(typeof proto[m], "function", `Client has no method ${m}`);
});

test("the generator follows the schemas and refuses a method without named params and result", () => {
  const schemas = fileURLToPath(new URL("../../../../protocol/schemas", import.meta.url));
  const gen = fileURLToPath(new URL("../../scripts/gen-types.mjs", import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), "stexec-ts-gen-"));
  try {
    for (const f of readdirSync(schemas)) copyFileSync(join(schemas, f), join(dir, f));
    const request = JSON.parse(readFileSync(join(dir, "request.schema.json"), "utf8"));
    request.properties.method.enum.push("newMethod");
    writeFileSync(join(dir, "request.schema.json"), JSON.stringify(request));
    const out = join(dir, "protocol.ts");
    const run = () => spawnSync(process.execPath, [gen, dir, out], { encoding: "utf8" });
    let r = run();
    assert.equal(r.status, 1);
    assert.match(r.stderr, /request\.schema\.json has no \$defs\/newMethodParams/);
    request.$defs.newMethodParams = { type: "object", properties: { sessionId: { $ref: "#/$defs/sessionId" } }, required: ["sessionId"], additionalProperties: false };
    writeFileSync(join(dir, "request.schema.json"), JSON.stringify(request));
    const response = JSON.parse(readFileSync(join(dir, "response.schema.json"), "utf8"));
    response.$defs.newMethodResult = { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false };
    writeFileSync(join(dir, "response.schema.json"), JSON.stringify(response));
    r = run();
    assert.equal(r.status, 0, r.stderr);
    const ts = readFileSync(out, "utf8");
    assert.match(ts, /export type NewMethodParams = \{\n  sessionId: SessionId;\n\};/);
    assert.match(ts, /export type NewMethodResult = \{\n  n: number;\n\};/);
    assert.match(ts, /newMethod: \{ params: NewMethodParams; result: NewMethodResult \};/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});
