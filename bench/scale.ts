import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestDns } from '../test/helpers/dns-server.ts';
import { verifyDomain } from '../test/helpers/domains.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { spawnWorker } from '../test/helpers/worker-process.ts';
import { countingSink, fmt, printMachine, withBenchDatabase } from './lib.ts';

/**
 * Scale-out benchmark (issue 15, target 5b): the same N queued emails delivered by 1, 2 and 4
 * `PROCESS_ROLE=worker` processes sharing one PostgreSQL, each run on a fresh database. The rate
 * is taken from the first to the last message the sink receives (so process start-up is not in
 * it); the speed-up is against the 1-worker run of the same invocation. Where the CPU went is read
 * from /proc over the same window: the worker processes, PostgreSQL (the postmaster and every
 * backend), and this process (the API that queued the emails, idle meanwhile, and the SMTP sink).
 *
 *   npm run bench -- scale [--emails=N] [--workers=1,2,4]
 */

const FROM = 'bench@mail.bench.test';
const BODY =
  '<html><body><h1>Hello {{firstName}}</h1><p>Your order {{order}} has shipped.</p><p><a href="https://example.com/t">Track it</a></p></body></html>';
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

export async function run(args: string[]): Promise<void> {
  const total = Number(args.find((a) => a.startsWith('--emails='))?.slice(9) ?? 5_000);
  const counts = (args.find((a) => a.startsWith('--workers='))?.slice(10) ?? '1,2,4').split(',').map(Number);
  printMachine('Herald scale-out benchmark: delivery by several worker processes on one PostgreSQL');
  console.log(`${fmt(total)} emails per run, SMTP pool of 5 per worker, no send-rate limit\n`);
  const dns = await startTestDns();
  const results: { workers: number; rate: number }[] = [];
  try {
    for (const workers of counts) {
      const r = await withBenchDatabase((databaseUrl) => deliverWith(databaseUrl, dns, workers, total));
      results.push({ workers, rate: r.rate });
      const base = results[0].rate;
      const cpu = r.cpuSeconds;
      const per1000 = (s: number) => ((s / total) * 1000).toFixed(2);
      console.log(
        `${workers} worker${workers > 1 ? 's' : ' '}: ${fmt(r.rate)} messages/s  speed-up ×${(r.rate / base).toFixed(2)}  (${fmt(r.sent)} SENT, ${r.duplicates} sent twice)`,
      );
      console.log(
        `   CPU s per 1,000 messages: workers ${per1000(cpu.workers)}, PostgreSQL ${per1000(cpu.postgres)}, API + sink ${per1000(cpu.self)}; ` +
          `the machine's cores were ${((100 * (cpu.workers + cpu.postgres + cpu.self)) / (r.seconds * r.cores)).toFixed(0)} % busy with these`,
      );
    }
  } finally {
    await dns.stop();
  }
}

type CpuSplit = { workers: number; postgres: number; self: number };

async function deliverWith(
  databaseUrl: string,
  dns: Awaited<ReturnType<typeof startTestDns>>,
  workerCount: number,
  total: number,
): Promise<{ rate: number; seconds: number; cores: number; sent: number; duplicates: number; cpuSeconds: CpuSplit }> {
  const sink = await countingSink();
  const dnsAddress = dns.address;
  const env = { SMTP_POOL_SIZE: '5', SEND_RATE_PER_SECOND: '100000', API_RATE_LIMIT_PER_MINUTE: '10000000' };
  const api = await startTestServer({ ...env, DNS_SERVERS: dnsAddress, SMTP_URL: sink.url, PROCESS_ROLE: 'api' }, { databaseUrl });
  const workers: ChildProcess[] = [];
  const logs: string[] = [];
  try {
    const b = await bootstrap(api.api, 'bench-scale');
    await verifyDomain(b.sk, dns, 'mail.bench.test');
    for (let i = 0; i < total; i += 50) {
      const to = Array.from({ length: Math.min(50, total - i) }, (_, j) => `s${i + j}@bench.example.com`);
      const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'Order {{order}}', body: BODY, data: { firstName: 'Ada', order: 42 } });
      if (res.status !== 200) throw new Error(res.text);
    }
    for (let i = 0; i < workerCount; i++) {
      workers.push(await spawnWorker({ databaseUrl, smtpUrl: sink.url, dnsAddress, env: { ...env, LOG_LEVEL: 'error' }, logs }));
    }
    await sink.until(1);
    const cpuAtFirst = cpuOf(workers);
    const selfAtFirst = process.cpuUsage();
    const first = performance.now();
    await sink.until(total);
    const seconds = (performance.now() - first) / 1000;
    const cpuAtLast = cpuOf(workers);
    const self = process.cpuUsage(selfAtFirst);
    const [{ n: sent }] = await api.sql<{ n: number }>("SELECT count(*)::int AS n FROM emails WHERE project_id = $1 AND status = 'SENT'", [b.project.id]);
    return {
      rate: (total - 1) / seconds,
      seconds,
      cores: os.availableParallelism(),
      sent,
      duplicates: sink.duplicates().length,
      cpuSeconds: {
        workers: cpuAtLast.workers - cpuAtFirst.workers,
        postgres: cpuAtLast.postgres - cpuAtFirst.postgres,
        self: (self.user + self.system) / 1e6,
      },
    };
  } catch (err) {
    console.error(logs.join('').slice(-2000));
    throw err;
  } finally {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map((w) => (w.exitCode === null ? new Promise((r) => w.once('exit', r)) : null)));
    await api.stop();
    await sink.stop();
  }
}

/** CPU seconds so far of the worker processes and of every `postgres` process descended from this one. */
function cpuOf(workers: ChildProcess[]): Omit<CpuSplit, 'self'> {
  const procs = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // Fields after the parenthesised command: state ppid … utime(14) stime(15) cutime(16) cstime(17).
        const close = stat.lastIndexOf(')');
        const comm = stat.slice(stat.indexOf('(') + 1, close);
        const f = stat.slice(close + 2).split(' ');
        const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
        return [{ pid: Number(pid), ppid: Number(f[1]), comm, ticks }];
      } catch {
        return []; // ended while we read
      }
    });
  const byParent = new Map<number, typeof procs>();
  for (const p of procs) byParent.set(p.ppid, [...(byParent.get(p.ppid) ?? []), p]);
  let postgres = 0;
  const walk = (pid: number) => {
    for (const child of byParent.get(pid) ?? []) {
      if (child.comm.startsWith('postgres')) postgres += child.ticks;
      walk(child.pid);
    }
  };
  walk(process.pid);
  const workerPids = new Set(workers.map((w) => w.pid));
  const workerTicks = procs.filter((p) => workerPids.has(p.pid)).reduce((s, p) => s + p.ticks, 0);
  return { workers: workerTicks / TICKS_PER_SECOND, postgres: postgres / TICKS_PER_SECOND };
}
