import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type TestServer, startTestServer } from './helpers/server.ts';

// Every ```sh block of the README, in order, in one bash session against a fresh capture-mode
// server, exactly as pasted. A block preceded by `<!-- readme-test: skip -->` is not run (installing,
// starting, external services). curl fails the run on any HTTP error (and retries a few times first,
// as a person would re-run a command whose email was not delivered yet).

const ROOT = path.resolve(import.meta.dirname, '..');
const SKIP = '<!-- readme-test: skip -->';

export type Block = { line: number; code: string };

/** The README's runnable shell blocks with their line numbers. */
export function shellBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```sh') continue;
    let prev = i - 1;
    while (prev >= 0 && lines[prev].trim() === '') prev--;
    const end = lines.findIndex((l, j) => j > i && l.trim() === '```');
    assert.ok(end > i, `unclosed sh block at README.md:${i + 1}`);
    if (prev < 0 || lines[prev].trim() !== SKIP) blocks.push({ line: i + 1, code: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

let server: TestServer;
let work: string;
before(async () => {
  server = await startTestServer();
  work = await mkdtemp(path.join(tmpdir(), 'herald-readme-'));
});
after(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

test('README: every sh block runs as pasted, in order, against a fresh server', async () => {
  const blocks = shellBlocks(await readFile(path.join(ROOT, 'README.md'), 'utf8'));
  assert.ok(blocks.length >= 5, `found only ${blocks.length} runnable blocks`);
  const script = [
    'set -euo pipefail',
    // A failing curl inside $(…) must stop the run too (bash does not pass -e into command substitutions).
    'shopt -s inherit_errexit',
    'curl() { command curl --fail-with-body --retry 10 --retry-all-errors --retry-delay 1 -sS "$@"; echo; }',
    ...blocks.map((b) => `echo "::README.md:${b.line}::" >&2\n${b.code}`),
    'echo "::done::" >&2',
  ].join('\n');
  const result = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd: work, env: { ...process.env, BASE: server.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('close', (code) => resolve({ code, out, err }));
  });
  const failedAt = [...result.err.matchAll(/::(README\.md:\d+)::/g)].at(-1)?.[1];
  assert.equal(result.code, 0, `the block at ${failedAt} failed:\n${result.err.slice(-3000)}\n--- stdout ---\n${result.out.slice(-3000)}`);
  assert.match(result.err, /::done::/);
  // The first email reached the capture inbox, rendered.
  assert.match(result.out, /^Subject: Welcome, Ada$/m);
  assert.match(result.out, /From: Acme <hello@sandbox\.herald\.test>/);
  assert.match(result.out, /"status":"SCHEDULED"/);
});
