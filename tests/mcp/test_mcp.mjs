// stexec-cli mcp against the official MCP SDK client: the real daemon on a
// private socket, the real CLI as the client's stdio server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const DAEMON = process.env.STEXEC_DAEMON;
const CLI = process.env.STEXEC_CLI;
const dir = mkdtempSync(join(tmpdir(), 'stexec-mcp-'));
const sock = join(dir, 's.sock');
const tag = `mcp-${process.pid}-${Date.now()}`;
let daemon;
let client;

// The time rule (tests/README.md): every duration a test chooses is
// multiplied by one factor, $STEXEC_TEST_TIME_SCALE (tests/run sets it),
// else the build's (3 with a sanitizer, else 1).
function scaled(ms) {
  const v = process.env.STEXEC_TEST_TIME_SCALE || process.env.STEXEC_TEST_BUILD_SCALE || '1';
  const f = Number(v);
  if (!(f >= 1 && f <= 100)) throw new Error(`STEXEC_TEST_TIME_SCALE=${v}: a factor from 1 to 100 was expected`);
  return Math.round(ms * f);
}

async function waitFor(pred, what, ms = 10000) {
  const until = Date.now() + scaled(ms);
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// Live processes other than the daemon (and its sentinel while it runs)
// that carry our tag in their environment.
function leftovers() {
  const found = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === daemon.pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`STEXEC_E2E_TAG=${tag}`)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (state === 'Z') continue;
      if (comm === 'stexec-sentinel' && Number(ppid) === daemon.pid && daemon.exitCode === null) continue;
      found.push(pid);
    } catch { /* gone, or not ours to read */ }
  }
  return found;
}

async function connect() {
  const transport = new StdioClientTransport({
    command: CLI,
    args: ['--socket', sock, 'mcp', '--cwd', dir],
    stderr: 'inherit',
  });
  const c = new Client({ name: 'stexec-test', version: '1.0.0' });
  await c.connect(transport);
  return c;
}

const text = (r) => r.content.map((b) => b.text).join('');
const bash = (command, opts) =>
  client.callTool({ name: 'bash', arguments: { command } }, undefined, opts);

before(async () => {
  assert.ok(DAEMON && CLI, 'STEXEC_DAEMON and STEXEC_CLI must be set');
  daemon = spawn(DAEMON, ['--socket', sock, '--output-dir', join(dir, 'out'),
    '--state-dir', join(dir, 'state')], {
    env: { ...process.env, STEXEC_E2E_TAG: tag },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitFor(() => existsSync(sock), 'the daemon socket');
  client = await connect();
});

after(async () => {
  try {
    await client?.close();
    await waitFor(() => leftovers().length === 0, 'no tool process left');
  } finally {
    // Stop the daemon whatever failed, or it keeps this process alive.
    const exited = new Promise((r) => daemon.on('exit', (c) => r(c)));
    daemon.kill('SIGTERM');
    const code = await exited;
    rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, 'the daemon stops cleanly');
  }
});

test('lists the built-in tools with their input schemas', async () => {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ['bash', 'read_file', 'write_file', 'glob', 'grep', 'list_dir'])
    assert.ok(byName[name], `no ${name}`);
  assert.equal(byName.bash.inputSchema.type, 'object');
  assert.ok(byName.bash.inputSchema.properties.command);
  assert.equal(byName.read_file.annotations.readOnlyHint, true);
  assert.equal(byName.bash.annotations.readOnlyHint, false);
});

test('calls bash', async () => {
  const r = await bash('echo hello from $PWD');
  assert.equal(r.isError, false);
  assert.equal(text(r), `hello from ${dir}\n`);
});

test('a failing command is isError', async () => {
  const r = await bash('echo oops; exit 3');
  assert.equal(r.isError, true);
  assert.match(text(r), /oops/);
  assert.match(text(r), /3/);
});

test('an unknown tool is isError', async () => {
  const r = await client.callTool({ name: 'nope', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(text(r), /No such tool available: nope/);
});

test('parallel calls: unsafe ones run alone, each gets its own result', async () => {
  const span = 's=$(date +%s%N); sleep 0.2; e=$(date +%s%N); echo $s $e';
  const [a, b, r] = await Promise.all([
    bash(span),
    bash(span),
    client.callTool({ name: 'read_file', arguments: { file_path: '/etc/hostname' } }),
  ]);
  const [as, ae] = text(a).trim().split(' ').map(BigInt);
  const [bs, be] = text(b).trim().split(' ').map(BigInt);
  assert.ok(ae <= bs || be <= as, 'two bash calls overlapped');
  assert.equal(r.isError, false);
  assert.equal(text(r).trim().split('\t').pop(), readFileSync('/etc/hostname', 'utf8').trim());
});

test('a failing bash cancels the calls beside it, not later ones', async () => {
  // The failing call sleeps first so that its sibling is surely added to the
  // same turn before it fails, however loaded the machine.
  const [fail, sibling] = await Promise.all([bash('sleep 0.3; exit 1'), bash('echo never')]);
  assert.equal(fail.isError, true);
  assert.equal(sibling.isError, true);
  assert.match(text(sibling), /Cancelled: parallel tool call bash\(sleep 0.3; exit 1\) errored/);
  const later = await bash('echo later');
  assert.equal(later.isError, false);
  assert.equal(text(later), 'later\n');
});

test('progress reaches a call that asks for it', async () => {
  const seen = [];
  const r = await bash('echo working >&3; sleep 0.1; echo done', {
    onprogress: (p) => seen.push(p),
  });
  assert.equal(text(r), 'done\n');
  assert.ok(seen.some((p) => p.message === 'working'), JSON.stringify(seen));
  assert.ok(seen.every((p, i) => p.progress === i + 1));
});

test('cancelling a call interrupts its tool', async () => {
  const pidfile = join(dir, 'sleeper.pid');
  const ac = new AbortController();
  const call = bash(`echo $$ > ${pidfile}; exec sleep 30`, { signal: ac.signal });
  await waitFor(() => existsSync(pidfile) && readFileSync(pidfile, 'utf8').endsWith('\n'), 'the tool to start');
  const pid = Number(readFileSync(pidfile, 'utf8'));
  ac.abort('changed my mind');
  await assert.rejects(call);
  await waitFor(() => {
    try { process.kill(pid, 0); return false; } catch { return true; }
  }, 'the cancelled tool to die');
  const next = await bash('echo still serving');
  assert.equal(text(next), 'still serving\n');
});

// Jobs (PROTOCOL.md §4, Jobs) need nothing of MCP: a background call's
// result, and bash_output and kill_shell, which the daemon answers itself,
// come back as any tool's.
test('a background bash, bash_output and kill_shell pass through like any tool', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const name of ['bash_output', 'kill_shell']) assert.ok(names.includes(name), `no ${name}`);
  const started = await client.callTool({
    name: 'bash',
    arguments: { command: 'echo serving; sleep 30', run_in_background: true, yield_ms: scaled(300) },
  });
  assert.equal(started.isError, false, text(started));
  const m = /Started job (j-\d+)/.exec(text(started));
  assert.ok(m, text(started));
  assert.match(text(started), /serving/);
  const out = await client.callTool({ name: 'bash_output', arguments: { bash_id: m[1] } });
  assert.equal(out.isError, false, text(out));
  assert.match(text(out), /running/);
  const killed = await client.callTool({ name: 'kill_shell', arguments: { shell_id: m[1] } });
  assert.equal(killed.isError, false, text(killed));
  assert.match(text(killed), new RegExp(`${m[1]}.*ended`));
  const none = await client.callTool({ name: 'bash_output', arguments: { bash_id: 'j-999' } });
  assert.equal(none.isError, true, text(none));
});

// bash_session: the MCP session's one live shell, its state kept from
// call to call, answered by the daemon like the job tools.
test('bash_session keeps its shell from call to call', async () => {
  const { tools } = await client.listTools();
  const def = tools.find((t) => t.name === 'bash_session');
  assert.ok(def, 'no bash_session');
  assert.match(def.description, /restart/);
  const shell = (args) => client.callTool({ name: 'bash_session', arguments: args });
  const first = await shell({ command: 'mkdir -p sub && cd sub && export MCP_V=kept && f() { echo fn; }' });
  assert.equal(first.isError, false, text(first));
  const second = await shell({ command: 'pwd; echo $MCP_V; f' });
  assert.equal(text(second), `${join(dir, 'sub')}\nkept\nfn\n`);
  const failed = await shell({ command: 'false' });
  assert.equal(failed.isError, true, text(failed));
  const fresh = await shell({ restart: true, command: 'echo "[$MCP_V]"' });
  assert.equal(text(fresh), '[]\n');
});

// An image read_file returns is MCP image content, its bytes intact.
test('read_file of a PNG is MCP image content', async () => {
  const { writeFileSync } = await import('node:fs');
  const { deflateSync } = await import('node:zlib');
  // PNG's CRC-32 (Node 18's zlib has none).
  const crc32 = (buf) => {
    let c = ~0;
    for (const byte of buf) {
      c ^= byte;
      for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
    }
    return ~c;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type), data])) >>> 0);
    return Buffer.concat([len, Buffer.from(type), data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(2, 0);
  ihdr.writeUInt32BE(2, 4);
  ihdr[8] = 8;
  const png = Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.from([0, 1, 2, 0, 3, 4]))),
    chunk('IEND', Buffer.alloc(0))]);
  const path = join(dir, 'dot.png');
  writeFileSync(path, png);
  const r = await client.callTool({ name: 'read_file', arguments: { file_path: path } });
  assert.equal(r.isError, false);
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].type, 'image');
  assert.equal(r.content[0].mimeType, 'image/png');
  assert.deepEqual(Buffer.from(r.content[0].data, 'base64'), png);
});
