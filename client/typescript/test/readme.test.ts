// The TypeScript example of the top README.md, run exactly as written
// against the real daemon, so it stays true.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import ts from "typescript";
import { Daemon } from "./daemon.js";

const readme = fileURLToPath(new URL("../../../../README.md", import.meta.url));
// Inside the package, so `import "stexec"` resolves to the package itself.
const script = fileURLToPath(new URL("./readme-example.mjs", import.meta.url));

let d: Daemon;

before(async () => {
  d = await Daemon.start();
});

after(async () => {
  rmSync(script, { force: true });
  assert.deepEqual(d.leftovers(), []);
  assert.equal(await d.stop(), 0, d.log);
});

function example(): string {
  const text = readFileSync(readme, "utf8");
  const m = /<!-- client\/typescript\/test\/readme\.test\.ts runs this block as written -->\n```ts\n([\s\S]*?)\n```/.exec(text);
  assert.ok(m, "README.md has no TypeScript example under its marker");
  return m[1]!;
}

test("the README example type-checks, runs and prints the results in order", async () => {
  const source = example();
  assert.ok(source.split("\n").length <= 12, "the example stays short");
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
  });
  assert.deepEqual(out.diagnostics ?? [], []);
  writeFileSync(script, out.outputText);
  const env = { ...process.env, STEXEC_SOCKET: d.socket };
  const { stdout } = await promisify(execFile)(process.execPath, [script], { env, timeout: 60000 });
  const lines = stdout.trim().split("\n");
  assert.equal(lines.length, 2, stdout);
  assert.equal(lines[0], "toolu_01 false Linux");
  // The first entry of /, whatever this machine has there.
  assert.match(lines[1]!, /^toolu_02 false \S/);
  // closeSession ran: nothing is left open.
  const { Client } = await import("../src/index.js");
  const c = await Client.connect(d.socket);
  assert.deepEqual((await c.listSessions()).sessions, []);
  c.close();
});
