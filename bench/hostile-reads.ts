import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { HEAVY_READ_TIME, heavyReads } from '../src/http/heavy-reads.ts';
import { type Bootstrapped, bootstrap } from '../test/helpers/bootstrap.ts';
import { type TestServer, startTestServer } from '../test/helpers/server.ts';
import { fmt, loadAverage, printMachine, verdict, withBenchDatabase } from './lib.ts';

/**
 * `npm run bench -- hostile-reads [--contacts=N]` (default 1,000,000): one project counts a segment
 * over its N contacts without pause, two counts at a time (its heavy-read slots), while another
 * project of 10,000 contacts tracks 100 events a second and counts its own segment every 250 ms.
 * Prints, per phase, the other project's latencies, the counting project's time spent counting
 * (in backend-seconds per second) and how busy the machine was. Reference, same run: the other
 * project alone, before and after. Phases: with the heavy-read slots alone (the time budget
 * lifted, as before it existed), then with the budget, through its burst, then steady. Target: at the steady phase the counting project's share of the time is at most
 * HEAVY_READ_TIME.sustainedShare (plus one count in flight).
 */

const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 20_000);
const LOOPS = 2;
const VICTIM_CONTACTS = 10_000;
const proCondition = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };

/** The machine's busy ticks (user, nice, system, irq, softirq, steal) from /proc/stat, in hundredths of a second. */
const busyTicks = () => {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number);
  return f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
};
const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;
};

type Phase = { label: string; busy: number; track: number[]; counts: number[]; counting: number; refused: number; counted: number };

async function seed(server: TestServer, p: Bootstrapped, prefix: string, n: number): Promise<void> {
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT 'cnt_' || $3 || g, $1, $3 || g || '@example.com', true, jsonb_build_object('plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END)
       FROM generate_series(1, $2::int) g`,
    [p.project.id, n, prefix],
  );
}

/** One phase of `ms`: the other project's paced load, and `hostile`'s counting loops when given. */
async function phase(label: string, ms: number, victim: Bootstrapped, hostile?: Bootstrapped): Promise<Phase> {
  let stop = false;
  const result: Phase = { label, busy: 0, track: [], counts: [], counting: 0, refused: 0, counted: 0 };
  const loops = hostile
    ? Array.from({ length: LOOPS }, async () => {
        while (!stop) {
          const started = performance.now();
          const res = await hostile.sk.post('/segments/count', { condition: proCondition });
          if (res.status === 200) {
            result.counted++;
            result.counting += performance.now() - started;
          } else if (res.status === 429) {
            result.refused++;
            await sleep(50);
          } else throw new Error(`hostile count: ${res.status} ${res.text}`);
        }
      })
    : [];
  const ticks = busyTicks();
  const started = performance.now();
  const tracks: Promise<void>[] = [];
  let i = 0;
  const pacer = setInterval(() => {
    for (let k = 0; k < 2; k++) {
      const sent = performance.now();
      const email = `victim${(i++ % VICTIM_CONTACTS) + 1}@example.com`;
      tracks.push(
        victim.pk.post('/v1/track', { email, event: 'visit' }).then((res) => {
          if (res.status !== 200) throw new Error(`track: ${res.status} ${res.text}`);
          result.track.push(performance.now() - sent);
        }),
      );
    }
  }, 20);
  const counter = (async () => {
    while (performance.now() - started < ms) {
      const sent = performance.now();
      const res = await victim.sk.post('/segments/count', { condition: proCondition });
      if (res.status !== 200) throw new Error(`victim count: ${res.status} ${res.text}`);
      result.counts.push(performance.now() - sent);
      await sleep(250);
    }
  })();
  await sleep(ms);
  clearInterval(pacer);
  stop = true;
  await Promise.all([counter, ...tracks, ...loops]);
  const seconds = (performance.now() - started) / 1000;
  result.busy = (busyTicks() - ticks) / seconds;
  result.counting /= seconds * 1000;
  return result;
}

const row = (p: Phase) =>
  `| ${p.label} | ${p.busy.toFixed(0)} % | ${percentile(p.track, 50).toFixed(0)} / ${percentile(p.track, 99).toFixed(0)} ms | ${percentile(p.counts, 50).toFixed(0)} / ${percentile(p.counts, 99).toFixed(0)} ms | ${p.counted ? `${fmt(p.counted)} (${p.refused} refused)` : '-'} | ${p.counted ? p.counting.toFixed(2) : '-'} |`;

export async function run(args: string[]): Promise<void> {
  const contacts = Number(args.find((a) => a.startsWith('--contacts='))?.slice('--contacts='.length) ?? 1_000_000);
  printMachine('Herald hostile-reads benchmark');
  await withBenchDatabase(async (databaseUrl) => {
    const server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' }, { databaseUrl });
    try {
      const hostile = await bootstrap(server.api, 'counting without pause');
      const victim = await bootstrap(server.api, 'another project');
      await seed(server, hostile, 'h', contacts);
      await seed(server, victim, 'victim', VICTIM_CONTACTS);
      await server.sql('ANALYZE contacts');
      const one = await hostile.sk.post('/segments/count', { condition: proCondition });
      console.log(`${fmt(contacts)} contacts, a third of them 'pro': one count alone answers ${fmt(one.body.count)}; ${loadAverage()}\n`);

      const budget = HEAVY_READ_TIME;
      const withBudget = server.ctx.heavyReads;
      server.ctx.heavyReads = heavyReads(server.ctx.config.databasePoolSize, { burstMs: Number.MAX_SAFE_INTEGER, sustainedShare: 1 });
      const phases: Phase[] = [await phase('the other project alone (reference)', PHASE_MS, victim)];
      phases.push(await phase('counting, slots only (no time budget)', PHASE_MS, victim, hostile));
      server.ctx.heavyReads = withBudget;
      // Through the burst: two loops spend it at two backend-seconds a second, less what drains.
      const burstMs = Math.ceil(budget.burstMs / (LOOPS - budget.sustainedShare)) + 2_000;
      phases.push(await phase(`counting, time budget: its burst (${(burstMs / 1000).toFixed(0)} s)`, burstMs, victim, hostile));
      const steady = await phase('counting, time budget: steady', PHASE_MS, victim, hostile);
      phases.push(steady, await phase('the other project alone, again', PHASE_MS, victim));

      console.log(
        `Phases of ${PHASE_MS / 1000} s; the other project: 100 tracks/s and a count every 250 ms; the counting project: ${LOOPS} counts at once, without pause.`,
      );
      console.log(`Budget: ${budget.burstMs / 1000} s at once, then ${budget.sustainedShare * 100} % of the time (http/heavy-reads.ts).\n`);
      console.log(
        '| Phase | Machine busy (of one core) | Other project: track p50 / p99 | Its count p50 / p99 | Counts of the counting project | Its backend-seconds a second |',
      );
      console.log('|---|---|---|---|---|---|');
      for (const p of phases) console.log(row(p));
      // One count may be in flight past the budget per slot: allow a tenth over the share.
      const target = budget.sustainedShare * 1.1 + 0.05;
      console.log(
        `\nSteady share ${steady.counting.toFixed(2)} backend-seconds a second, target ≤ ${target.toFixed(2)}: ${verdict(steady.counting <= target)}; ${loadAverage()}`,
      );
    } finally {
      await server.stop();
    }
  });
}
