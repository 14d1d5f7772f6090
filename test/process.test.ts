import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/connect.ts';
import { freePort } from '../src/db/embedded.ts';
import { hasGlibc } from '../src/native/malloc-trim.ts';
import { removeDataDir } from './helpers/data-dir.ts';
import { createTestDatabase } from './helpers/server.ts';

// Herald as a person runs it: `npm start` and `node src/main.ts` as real processes on an embedded
// database in DATA_DIR (a private 0700 directory, as /root is), stopped with signals.

const ROOT = path.resolve(import.meta.dirname, '..');
const NODE = process.execPath;
const WAIT_MS = 180_000;

type Proc = { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> };

function launch(cmd: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const proc = { child, out: () => out, err: () => err, exited };
  launched.push(proc);
  return proc;
}
const launched: Proc[] = [];

async function until<T>(what: string, fn: () => T | undefined | false, ms = WAIT_MS): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The first JSON log line containing `text`, once the process has logged it (it carries the pid). */
async function logged(p: Proc, text: string): Promise<{ pid: number; mallocTrim?: boolean }> {
  const line = await until(`a log line with "${text}"`, () => {
    if (p.child.exitCode !== null) assert.fail(`exited early: ${p.out()}${p.err()}`);
    return p
      .out()
      .split('\n')
      .find((l) => l.includes(text));
  });
  return JSON.parse(line) as { pid: number; mallocTrim?: boolean };
}

/** The pid of the Herald process that logged it is listening. */
const listening = async (p: Proc): Promise<number> => (await logged(p, 'Herald listening on')).pid;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The V8 heap flags on a started process's command line. */
const heapFlags = (pid: number) =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    .split('\0')
    .filter((arg) => /^--(max-semi-space-size|heap-growing-percent)=/.test(arg));

const noStack = (text: string) => assert.doesNotMatch(text, /^\s+at .+:\d+:\d+\)?$/m, `a stack trace was printed:\n${text}`);

const dirs: string[] = [];
async function privateDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'herald-proc-')); // 0700, like /root
  dirs.push(dir);
  return path.join(dir, 'data');
}
after(async () => {
  // What a failed test left running is stopped as the test would have stopped it (npm passes SIGTERM on).
  const running = launched.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  for (const p of running) p.child.kill('SIGTERM');
  await Promise.all(running.map((p) => Promise.race([p.exited, new Promise((r) => setTimeout(r, 15_000))])));
  for (const dir of dirs) {
    await removeDataDir(path.join(dir, 'data'));
    await rm(dir, { recursive: true, force: true });
  }
});

describe('start and stop', () => {
  test('npm start: one owner per DATA_DIR, one-line failures, SIGTERM stops everything, SIGKILL leaves no lock-out', async () => {
    const dataDir = await privateDataDir();
    const port = await freePort();
    const npm = launch('npm', ['start', '--silent'], { DATA_DIR: dataDir, PORT: String(port) });
    const { pid, mallocTrim } = await logged(npm, 'Herald listening on');
    assert.notEqual(pid, npm.child.pid);
    assert.equal(mallocTrim, hasGlibc(), 'prestart built the malloc_trim addon and Herald loaded it');
    assert.deepEqual(heapFlags(pid), ['--max-semi-space-size=16']);
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    assert.equal(health.status, 200);

    // The embedded database: random passwords in DATA_DIR, Herald connects as a non-superuser owner.
    const file = path.join(dataDir, 'postgres-passwords.json');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const passwords = JSON.parse(readFileSync(file, 'utf8')) as { superuser: string; owner: string };
    assert.match(passwords.owner, /^[A-Za-z0-9_-]{32}$/);
    const pgPort = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[3]);
    const asOwner = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'herald', password: passwords.owner, database: 'herald' });
    await asOwner.connect();
    const role = await asOwner.query('SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user');
    assert.deepEqual(role.rows[0], { rolsuper: false, rolcreaterole: false, rolcreatedb: false });
    const owned = await asOwner.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname IN ('public', 'pgboss') AND tableowner <> 'herald'`);
    assert.equal(owned.rows[0].n, 0);
    await asOwner.end();
    const oldPassword = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'postgres', password: 'herald', database: 'postgres' });
    await assert.rejects(oldPassword.connect(), (err: { code?: string }) => err.code === '28P01');

    // A second process on the same DATA_DIR: one line saying what to do, exit 1, nothing disturbed.
    const second = launch(NODE, ['src/main.ts'], { DATA_DIR: dataDir, PORT: String(await freePort()) });
    assert.equal(await second.exited, 1);
    assert.equal(
      second.err().split('\n')[0],
      `Herald could not start: The embedded database in ${path.join(dataDir, 'postgres')} is already in use by another Herald process (pid ${pid}): stop that process first, or start this one with DATABASE_URL pointing at the same PostgreSQL (see "Scaling" in the README)`,
    );
    noStack(second.err());

    // The port taken: one line.
    const third = launch(NODE, ['src/main.ts'], { DATABASE_URL: await createTestDatabase(), DATA_DIR: dataDir, PORT: String(port) });
    assert.equal(await third.exited, 1);
    assert.equal(third.err().trim(), `Herald could not start: Port ${port} on 0.0.0.0 is already in use (another Herald?): stop that program or set PORT`);
    assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);

    // SIGTERM to npm reaches Herald: it stops its database and exits 0, npm with it.
    npm.child.kill('SIGTERM');
    assert.equal(await npm.exited, 0);
    assert.match(npm.out(), /"msg":"stopped"/);
    await until('Herald to exit', () => !alive(pid));
    assert.equal(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), false);
    assert.equal(existsSync(path.join(dataDir, 'herald.pid')), false);

    // Killed outright, Herald leaves its database running; the next start takes it over.
    const killed = launch(NODE, ['src/main.ts'], { DATA_DIR: dataDir, PORT: String(port) });
    await listening(killed);
    killed.child.kill('SIGKILL');
    await killed.exited;
    const orphan = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    assert.ok(alive(orphan), 'the killed process left its PostgreSQL running');
    const next = launch(NODE, ['src/main.ts'], { DATA_DIR: dataDir, PORT: String(port) });
    await listening(next);
    assert.equal(alive(orphan), false);
    assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
    next.child.kill('SIGINT');
    assert.equal(await next.exited, 0);
  });

  test('npm start gives a PROCESS_ROLE=worker process a smaller young generation and a slower-growing heap', async () => {
    const npm = launch('npm', ['start', '--silent'], { DATA_DIR: await privateDataDir(), DATABASE_URL: await createTestDatabase(), PROCESS_ROLE: 'worker' });
    const { pid } = await logged(npm, 'Herald worker started');
    assert.deepEqual(heapFlags(pid), ['--max-semi-space-size=4', '--heap-growing-percent=100']);
    npm.child.kill('SIGTERM');
    assert.equal(await npm.exited, 0);
  });

  test("npm start's flags follow a PROCESS_ROLE given only in .env, and the environment wins over .env", async (t) => {
    // start-flags.ts is what the start script runs to pick the flags; it reads .env from the working directory, as config.ts does.
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-env-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const flags = (env: Record<string, string>) =>
      execFileSync(NODE, [path.join(ROOT, 'src/start-flags.ts')], { cwd: dir, env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' }).trim();
    assert.equal(flags({}), '--max-semi-space-size=16');
    await writeFile(path.join(dir, '.env'), '# the role of this machine\nPROCESS_ROLE="worker"\n');
    assert.equal(flags({}), '--max-semi-space-size=4 --heap-growing-percent=100');
    assert.equal(flags({ PROCESS_ROLE: 'api' }), '--max-semi-space-size=16');
    assert.match(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start, / exec node \$\(node src\/start-flags\.ts\) src\/main\.ts$/);
  });

  test('a DATA_DIR from before (superuser password "herald", tables owned by the superuser) keeps working', async () => {
    const dataDir = await privateDataDir();
    const quiet = { info: () => {}, debug: () => {}, error: () => {} };
    const legacy = await startEmbeddedPostgres(path.join(dataDir, 'postgres'), quiet, { superuserPassword: 'herald' });
    await legacy.ensureDatabase('herald');
    const c = new pg.Client({ connectionString: legacy.urlFor('herald') });
    await c.connect();
    await c.query(`CREATE SCHEMA legacy; CREATE TABLE legacy.notes (id serial PRIMARY KEY, body text); INSERT INTO legacy.notes (body) VALUES ('kept')`);
    await c.end();
    await legacy.stop();

    const port = await freePort();
    const herald = launch(NODE, ['src/main.ts'], { DATA_DIR: dataDir, PORT: String(port) });
    await listening(herald);
    assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
    const passwords = JSON.parse(readFileSync(path.join(dataDir, 'postgres-passwords.json'), 'utf8')) as { owner: string };
    const pgPort = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[3]);
    const asOwner = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'herald', password: passwords.owner, database: 'herald' });
    await asOwner.connect();
    const kept = await asOwner.query('INSERT INTO legacy.notes (body) VALUES ($1) RETURNING id', ['new']);
    assert.equal(kept.rows[0].id, 2);
    await asOwner.end();
    const old = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'postgres', password: 'herald', database: 'postgres' });
    await assert.rejects(old.connect(), (err: { code?: string }) => err.code === '28P01');
    herald.child.kill('SIGTERM');
    assert.equal(await herald.exited, 0);
  });

  test('invalid configuration: one line naming the variable, nothing started', async () => {
    const dataDir = await privateDataDir();
    const p = launch(NODE, ['src/main.ts'], { DATA_DIR: dataDir, PORT: 'eighty' });
    assert.equal(await p.exited, 1);
    assert.equal(p.err().trim(), 'Invalid configuration: PORT must be a whole number (got "eighty")');
    assert.equal(existsSync(path.join(dataDir, 'postgres')), false);
  });
});
