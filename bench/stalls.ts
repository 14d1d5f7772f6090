import { readFileSync } from 'node:fs';
import { PerformanceObserver, constants, performance } from 'node:perf_hooks';
import pg from 'pg';
import type { SlowRequest } from './paced-load.ts';

/**
 * What the machine was doing when a half-rate phase's requests were slow (`BENCH_STALLS=1`). Slow
 * requests less than 100 ms apart form one stall; for each, it prints what was seen from 150 ms
 * before to 60 ms after:
 *  - every 20 ms, the wait events of PostgreSQL's active sessions (IO:WalSync is a commit waiting
 *    for the disk, IO:WalInitWrite a new 16 MB WAL segment being written, Client:ClientRead a
 *    session waiting for Herald's next statement), how busy the CPUs were, and the kernel's dirty
 *    and writeback memory;
 *  - this process's event-loop delays over 15 ms, its GC pauses over 10 ms, and Herald's database
 *    pool opening or closing a connection.
 * How the stalls of `bench track` and `bench send` were found (bench/README.md § track). It adds a
 * query every 20 ms, so it is off unless asked for.
 */
export type StallWatch = { report: (slow: SlowRequest[], from: number) => Promise<void> };

const GAP_MS = 100;
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

export function watchStalls(databaseUrl: string, heraldPool: pg.Pool): StallWatch | null {
  if (process.env.BENCH_STALLS !== '1') return null;
  const seen: { at: number; what: string }[] = [];
  const note = (what: string, at = performance.timeOrigin + performance.now()) => seen.push({ at, what });

  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other';
      if (e.duration > 10) note(`GC pause ${e.duration.toFixed(0)} ms (${kind})`, performance.timeOrigin + e.startTime);
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  let tick = performance.now();
  const loop = setInterval(() => {
    const now = performance.now();
    if (now - tick > 20) note(`event loop held ${(now - tick - 5).toFixed(0)} ms`, performance.timeOrigin + tick);
    tick = now;
  }, 5);
  const onConnect = () => note('Herald pool: connection opened');
  const onRemove = () => note('Herald pool: connection closed');
  heraldPool.on('connect', onConnect);
  heraldPool.on('remove', onRemove);

  const machine = machineSampler();
  let sampling = true;
  const sampler = (async () => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      while (sampling) {
        const at = performance.timeOrigin + performance.now();
        const state = machine();
        const { rows } = await client.query<{ waits: string | null }>(
          `SELECT string_agg(what || ' ×' || n, ', ' ORDER BY n DESC) AS waits
             FROM (SELECT coalesce(wait_event_type || ':' || wait_event, state) AS what, count(*) AS n
                     FROM pg_stat_activity
                    WHERE backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()
                    GROUP BY 1) AS w`,
        );
        note(`postgres: ${rows[0].waits ?? 'no active session'}; ${state}`, at);
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await client.end();
    }
  })().catch((err: unknown) => note(`the sampler stopped: ${err instanceof Error ? err.message : String(err)}`));

  return {
    async report(slow, from) {
      sampling = false;
      await sampler;
      clearInterval(loop);
      gc.disconnect();
      heraldPool.off('connect', onConnect);
      heraldPool.off('remove', onRemove);
      const stalls = groupStalls(slow);
      const at = (t: number) => `${((t - from) / 1000).toFixed(3)} s`;
      console.log(`   stalls (BENCH_STALLS): ${slow.length} requests over 50 ms, in ${stalls.length} stalls; times from the phase's start`);
      for (const s of stalls) {
        console.log(`   - ${at(s.first)} to ${at(s.last)}: ${s.count} requests, the slowest ${Math.round(s.worst)} ms`);
        for (const e of seen.filter((e) => e.at > s.first - 150 && e.at < s.last + 60)) console.log(`       ${at(e.at)}  ${e.what}`);
      }
    },
  };
}

type Stall = { first: number; last: number; count: number; worst: number };

function groupStalls(slow: SlowRequest[]): Stall[] {
  const stalls: Stall[] = [];
  for (const r of [...slow].sort((a, b) => a.due - b.due)) {
    const s = stalls.at(-1);
    if (s && r.due - s.last < GAP_MS) Object.assign(s, { last: r.due, count: s.count + 1, worst: Math.max(s.worst, r.ms) });
    else stalls.push({ first: r.due, last: r.due, count: 1, worst: r.ms });
  }
  return stalls;
}

/**
 * Since the last call: how busy the machine's CPUs were and how much of their time the hypervisor
 * gave to other machines (steal); and the kernel's dirty and writeback page cache. Linux only.
 */
function machineSampler(): () => string {
  let last: number[] | null = null;
  return () => {
    try {
      // cpu  user nice system idle iowait irq softirq steal
      const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
      const delta = last ? cpu.map((v, i) => v - last![i]) : cpu.map(() => 0);
      last = cpu;
      const total = delta.reduce((a, b) => a + b, 0) || 1;
      const pct = (v: number) => `${Math.round((v / total) * 100)} %`;
      const meminfo = readFileSync('/proc/meminfo', 'utf8');
      const mb = (key: string) => (Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(meminfo)?.[1] ?? 0) / 1024).toFixed(0);
      return `CPUs ${pct(total - delta[3] - delta[4] - delta[7])} busy, ${pct(delta[4])} iowait, ${pct(delta[7])} stolen; kernel: ${mb('Dirty')} MB dirty, ${mb('Writeback')} MB in writeback`;
    } catch {
      return '';
    }
  };
}
