import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../src/db/embedded.ts';
import { nodeFlagsFor } from '../src/start-flags.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { removeDataDir } from '../test/helpers/data-dir.ts';
import { createApi } from '../test/helpers/http.ts';
import { fmt, mallocSettings, printMachine, prepareMallocTrim, startCompileCache, verdict } from './lib.ts';

/**
 * `npm run bench -- idle [--emails=N] [--quiet-seconds=S]`: the memory of one idle Herald process
 * as `npm start` runs it (API and worker together, embedded PostgreSQL excluded: it is its own
 * processes) 15 s and 45 s after start-up, at its peak while it delivers N emails (capture mode, sandbox sender),
 * and S seconds after the last one. Reference: a bare Node process with the same flags, idle, in
 * the same run. Target (issue 15): under 150 MB after start-up and after the work.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
// As in `npm start`; PROBE=<file> adds `--import <file>` (e.g. a script printing process.memoryUsage()).
const NODE_FLAGS = [...nodeFlagsFor('all'), ...(process.env.PROBE ? ['--import', process.env.PROBE] : [])];
const TARGET_MB = 150;
const COMPILE_CACHE = startCompileCache(ROOT);

const status = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(20_000).then(() => child.kill('SIGKILL'))]);
}

async function bareNodeRss(): Promise<number> {
  const child = spawn(process.execPath, [...NODE_FLAGS, '-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(3000);
  const rss = status(child.pid!, 'VmRSS');
  child.kill('SIGKILL');
  return rss;
}

export async function run(args: string[]): Promise<void> {
  const opt = (name: string, dflt: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
  const emails = opt('emails', 2000);
  const quietSeconds = opt('quiet-seconds', 70);
  printMachine(`bench idle: RSS of \`npm start\` (API + worker, PostgreSQL excluded), ${fmt(emails)} emails delivered in between`);
  prepareMallocTrim();

  const bare = await bareNodeRss();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-idle-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const startHerald = async (): Promise<{ herald: ChildProcess; rss: number }> => {
    const herald = spawn(process.execPath, [...NODE_FLAGS, 'src/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        PORT: String(port),
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
        SEND_RATE_PER_SECOND: '100000',
        NODE_COMPILE_CACHE: COMPILE_CACHE,
        ...mallocSettings(), // bench/README.md § idle
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    for (let i = 0; ; i++) {
      if ((await fetch(`${base}/health`).catch(() => null))?.ok) break;
      if (i > 600 || herald.exitCode !== null) throw new Error('Herald did not start');
      await sleep(100);
    }
    await sleep(15_000); // start-up work settles (migrations, first queue polls)
    return { herald, rss: status(herald.pid!, 'VmRSS') };
  };
  // The first start after a change fills the compile cache, as `npm start` does; the second is measured.
  const first = await startHerald();
  await stop(first.herald);
  const { herald, rss: afterStart } = await startHerald();
  // V8's memory reducer waits 8 s after start-up's last full GC, then for a quiet moment.
  await sleep(30_000);
  const atRest = status(herald.pid!, 'VmRSS');
  try {
    const { sk } = await bootstrap(createApi(base), 'Idle bench');
    const started = performance.now();
    for (let i = 0; i < emails; i += 50) {
      const to = Array.from({ length: Math.min(50, emails - i) }, (_, j) => `r${i + j}@bench.example.com`);
      const res = await sk.post('/v1/send', {
        to,
        from: 'bench@sandbox.herald.test',
        subject: 'Hello {{email}}',
        body: '<p>Hello <a href="https://example.com/x">there</a></p>',
      });
      if (res.status !== 200) throw new Error(`send answered ${res.status}: ${res.text}`);
    }
    for (;;) {
      const waiting = await Promise.all(['QUEUED', 'SENDING'].map((state) => sk.get(`/emails?status=${state}&limit=1`)));
      if (waiting.every((w) => w.body.data.length === 0)) break;
      await sleep(250);
    }
    const seconds = (performance.now() - started) / 1000;
    const peak = status(herald.pid!, 'VmHWM');
    await sleep(quietSeconds * 1000);
    const afterWork = status(herald.pid!, 'VmRSS');

    const row = (what: string, mb: number, target: boolean) =>
      console.log(`| ${what} | ${mb.toFixed(0)} MB | ${(mb / bare).toFixed(2)}× | ${target ? verdict(mb < TARGET_MB) : '—'} |`);
    console.log(`delivered ${fmt(emails)} emails in ${seconds.toFixed(1)} s (${fmt(emails / seconds)}/s, capture mode)`);
    console.log('| Process | RSS | × bare Node | Target < 150 MB |');
    console.log('|---|---|---|---|');
    row('bare Node, idle (reference)', bare, false);
    row('Herald after its first start (compile cache filled)', first.rss, false);
    row('Herald 15 s after start-up', afterStart, true);
    row('Herald 45 s after start-up', atRest, true);
    row(`Herald peak while delivering`, peak, false);
    row(`Herald ${quietSeconds} s after the last email`, afterWork, true);
  } finally {
    await stop(herald);
    await removeDataDir(dataDir);
  }
}
