import { readFileSync, readdirSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import nodemailer from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { startEmbeddedPostgres } from '../src/db/connect.ts';
import { buildMallocTrim } from '../src/native/malloc-trim.ts';
import type { Api } from '../test/helpers/http.ts';

/** Shared pieces of the benchmarks: the machine line, a throw-away PostgreSQL, autocannon, number format. */

export function printMachine(title: string): void {
  const cpus = os.cpus();
  console.log(title);
  console.log(
    `machine: ${cpus[0]?.model ?? 'unknown cpu'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ${os.platform()} ${os.release()}`,
  );
}

/** The machine's load average, printed next to figures that other processes skew. */
export const loadAverage = () =>
  `load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;

/** Runs `fn` with the path of a file holding `source`: an autocannon `setupRequest` module, which its worker thread loads. */
export async function withSetupRequest<T>(source: string, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-request-'));
  const file = path.join(dir, 'setup-request.cjs');
  await writeFile(file, source);
  try {
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** A process's /proc stat: its name, parent, own CPU ticks (all threads) and its reaped children's; null once it has ended. */
function procStat(pid: number): { pid: number; comm: string; ppid: number; own: number; reaped: number } | null {
  try {
    // After the ")" closing comm: state ppid … utime(14) stime(15) cutime(16) cstime(17), 1-based over the whole line.
    const line = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = line.slice(line.lastIndexOf(')') + 2).split(' ');
    return {
      pid,
      comm: line.slice(line.indexOf('(') + 1, line.lastIndexOf(')')),
      ppid: Number(f[1]),
      own: Number(f[11]) + Number(f[12]),
      reaped: Number(f[13]) + Number(f[14]),
    };
  } catch {
    return null; // a process that ended while we read
  }
}

/** CPU milliseconds (user + system, all threads) used so far by process `pid`; 0 once it has ended, or off Linux. */
export const processCpuMs = (pid: number) => (procStat(pid)?.own ?? 0) * TICK_MS;

/**
 * CPU milliseconds used so far by the PostgreSQL servers this process started (the benchmarks'
 * embedded ones): each postmaster's own time, the time of its children it has reaped, and the time
 * of its live backends. Linux only (/proc); 0 elsewhere.
 */
export function postgresCpuMs(): number {
  const stats = readdirSync('/proc', { withFileTypes: true }).flatMap((d) => {
    const stat = /^\d+$/.test(d.name) ? procStat(Number(d.name)) : null;
    return stat ? [stat] : [];
  });
  const postmasters = new Set(stats.filter((s) => s.ppid === process.pid && s.comm === 'postgres').map((s) => s.pid));
  const ticks = stats.reduce((sum, s) => sum + (postmasters.has(s.pid) ? s.own + s.reaped : postmasters.has(s.ppid) ? s.own : 0), 0);
  return ticks * TICK_MS;
}

const quiet = { info: () => {}, debug: () => {}, error: () => {} };

/** Runs `fn` with the URL of a database in a fresh embedded PostgreSQL, removed afterwards. */
export async function withBenchDatabase<T>(fn: (databaseUrl: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-'));
  await chmod(dir, 0o755); // the embedded server may run as the 'postgres' user
  const pgServer = await startEmbeddedPostgres(path.join(dir, 'pg'), quiet as never);
  try {
    await pgServer.ensureDatabase('herald_bench');
    return await fn(pgServer.urlFor('herald_bench'));
  } finally {
    await pgServer.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

export type AutocannonResult = {
  '2xx': number;
  non2xx: number;
  errors: number;
  timeouts: number;
  duration: number;
  requests: { average: number };
  latency: { p50: number; p99: number; average: number };
};
export type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;
export const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** glibc's malloc settings (MALLOC_ARENA_MAX, MALLOC_TRIM_THRESHOLD_...) of the bench's own environment, passed through to the Herald it starts to measure their effect. */
export const mallocSettings = () => Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('MALLOC_')));
export const startCompileCache = (root: string) => process.env.NODE_COMPILE_CACHE ?? path.join(root, 'node_modules/.cache/herald-compile');

/** As `npm start`'s prestart: builds the malloc_trim addon the started Herald loads, and prints whether it will trim. */
export function prepareMallocTrim(): void {
  const outcome = buildMallocTrim();
  console.log(`malloc_trim helper: ${outcome.built ? 'built (Herald trims every 10 s)' : `not built, Herald will not trim: ${outcome.reason}`}`);
}

export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');

/**
 * The references' sending: `total` messages through a nodemailer pool of `poolSize` connections
 * (four sends in flight a connection), as fast as it goes; `source(i)` gives message i's source.
 * Returns messages/s.
 */
export async function poolSendRate(opts: {
  url: string;
  poolSize: number;
  total: number;
  from: string;
  to: (i: number) => string;
  source: (i: number) => Buffer | Promise<Buffer>;
}): Promise<number> {
  const transport = nodemailer.createTransport({ url: opts.url, pool: true, maxConnections: opts.poolSize, maxMessages: 1000 });
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: opts.poolSize * 4 }, async () => {
      while (next < opts.total) {
        const i = next++;
        await transport.sendMail({ envelope: { from: opts.from, to: [opts.to(i)] }, raw: await opts.source(i) });
      }
    }),
  );
  const rate = opts.total / ((performance.now() - start) / 1000);
  transport.close();
  return rate;
}

/** The reference for delivery benchmarks: `total` copies of one prebuilt message through a raw nodemailer pool. Returns messages/s. */
export const rawPoolRate = (opts: { url: string; poolSize: number; total: number; from: string; raw: Buffer; to: (i: number) => string }) =>
  poolSendRate({ ...opts, source: () => opts.raw });

/**
 * An SMTP server that only counts the benchmark's messages (recipients @bench.example.com; the
 * sign-up verification email is not one) and notes a recipient seen twice. With `sampleEvery`,
 * it also keeps every n-th message's source (at most MAX_SAMPLES), for a DKIM check.
 */
const MAX_SAMPLES = 20;
export async function countingSink(opts: { sampleEvery?: number } = {}) {
  let count = 0;
  let nextSample = 0;
  const seen = new Set<string>();
  const twice: string[] = [];
  const samples: Buffer[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, cb) {
      // Only the benchmark's mail: bootstrapping the project also sends a sign-up verification email.
      const ours = session.envelope.rcptTo.some((r) => r.address.endsWith('@bench.example.com'));
      // The first message at or past each n-th: with several connections delivering at once, the
      // count a message starts at skips numbers, and `count % n === 0` kept only a few samples.
      const sample = ours && opts.sampleEvery !== undefined && count >= nextSample && samples.length < MAX_SAMPLES;
      if (sample) nextSample = count + opts.sampleEvery!;
      const chunks: Buffer[] | null = sample ? [] : null;
      stream.on('data', (chunk: Buffer) => chunks?.push(chunk));
      stream.on('end', () => {
        if (chunks && samples.length < MAX_SAMPLES) samples.push(Buffer.concat(chunks));
        if (ours) count += 1;
        for (const r of session.envelope.rcptTo) {
          if (seen.has(r.address)) twice.push(r.address);
          seen.add(r.address);
        }
        cb();
      });
    },
  });
  server.on('error', () => {}); // a client that vanishes mid-session resets its socket
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address() as { port: number };
  return {
    url: `smtp://127.0.0.1:${address.port}`,
    count: () => count,
    duplicates: () => twice,
    samples: () => samples,
    reset: () => {
      count = 0;
      nextSample = 0;
      samples.length = 0;
      seen.clear();
      twice.length = 0;
    },
    /** Waits for `target` messages; fails when none arrives for two minutes. */
    until: async (target: number, tick: () => void = () => {}) => {
      let last = count;
      let movedAt = Date.now();
      while (count < target) {
        tick();
        if (count !== last) [last, movedAt] = [count, Date.now()];
        if (Date.now() - movedAt > 120_000) throw new Error(`delivery stalled at ${count} of ${target} messages`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A CSV file uploaded to POST /contacts/import, its job polled every `pollMs` until `completed`:
 * the job as GET /contacts/import/:jobId answers then. Throws on a refused upload or a failed job.
 */
export async function importCsv(api: Api, csv: string, pollMs: number): Promise<{ imported: number; updated: number; skipped: number }> {
  const fd = new FormData();
  fd.append('file', new Blob([csv], { type: 'text/csv' }), 'bench.csv');
  const res = await api.request('POST', '/contacts/import', { raw: fd });
  if (res.status !== 202) throw new Error(`upload failed: ${res.status} ${res.text}`);
  for (;;) {
    const job = await api.get(`/contacts/import/${res.body.jobId}`);
    if (job.body.status === 'completed') return job.body;
    if (job.body.status === 'failed') throw new Error(`import failed: ${job.text}`);
    await sleep(pollMs);
  }
}
