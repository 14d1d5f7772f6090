import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { prefixedId } from '../src/db/ids.ts';
import { splitCustomData } from '../src/modules/contacts/custom-data.ts';
import { upsertContactQuery } from '../src/modules/contacts/service.ts';
import { RECORD_EVENTS_SQL, recordEventsValues } from '../src/modules/events/record.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { halfRateLatency } from './half-rate.ts';
import type { PacedResult } from './paced-load.ts';
import { type AutocannonResult, autocannon, fmt, loadAverage, printMachine, verdict, withBenchDatabase, withSetupRequest } from './lib.ts';

/**
 * Track benchmark.
 *  (a) Throughput: POST /v1/track requests/s from 64 concurrent clients (public key), new and
 *      existing contacts mixed 1:3, vs the same writes (contact upsert + event insert in one
 *      transaction, the same statements) issued directly through `pg` on 64 connections.
 *      HTTP and SQL alternate in rounds so that drifting machine load hits both alike.
 *      Target: HTTP ≥ 100 % of SQL (issue 15: concurrent tracks commit together).
 *  (b) Latency at half the measured maximum HTTP rate, evenly paced from a thread of its own
 *      (`paced-load.ts` through `half-rate.ts`, as `bench send`), each request charged from the
 *      moment it was due. Target: p99 < 50 ms. The reference transaction paced at the same rate
 *      is printed next to it: the floor this machine and database allow.
 *
 * The Herald server runs with its default database pool (DATABASE_POOL_SIZE=20); set
 * BENCH_POOL_SIZE to change it. BENCH_SECONDS (default 10) is the length of each phase;
 * BENCH_STALLS=1 prints what happened during each stall of (b), BENCH_CHECKPOINT=1 runs a CHECKPOINT
 * before (b) (half-rate.ts says why), BENCH_RATE=<requests/s> runs (b) at that rate instead of half
 * the run's own peak (to compare two versions of Herald at one rate).
 */

const CONNECTIONS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = 3;
const EXISTING = 20_000;
const DATA = { path: '/pricing', plan: 'pro', visits: 3, ref: { value: 'newsletter', persistent: false } };

/** The request generator autocannon's worker thread loads: 1 new contact in 4, the rest existing. */
const SETUP_REQUEST = `
const { randomBytes } = require('node:crypto');
const prefix = randomBytes(4).toString('hex');
let n = 0;
module.exports = function setupRequest(req) {
  n += 1;
  const email = n % 4 === 0 ? 'new-' + prefix + '-' + n + '@bench.example.com' : 'e' + Math.floor(Math.random() * ${EXISTING}) + '@bench.example.com';
  req.body = JSON.stringify({ email, event: 'page_view', data: ${JSON.stringify(DATA)} });
  return req;
};
`;

type Sql = <T extends Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;

export async function run(): Promise<void> {
  printMachine('Herald track benchmark');
  await withSetupRequest(SETUP_REQUEST, (setupRequest) =>
    withBenchDatabase(async (databaseUrl) => {
      const env: Record<string, string> = { PROCESS_ROLE: 'api', API_RATE_LIMIT_PER_MINUTE: '10000000' };
      if (process.env.BENCH_POOL_SIZE) env.DATABASE_POOL_SIZE = process.env.BENCH_POOL_SIZE;
      const server = await startTestServer(env, { databaseUrl });
      try {
        const [{ v }] = await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v");
        console.log(`postgres: ${v} (embedded); Herald database pool: ${server.ctx.config.databasePoolSize}; ${loadAverage()}`);
        const http = await bootstrap(server.api, 'bench-track-http');
        const ref = await bootstrap(server.api, 'bench-track-sql');
        for (const p of [http, ref]) await seedContacts(server.sql, p.project.id);
        await server.sql('ANALYZE contacts');

        const cannon = (seconds: number) =>
          autocannon({
            url: server.url,
            connections: CONNECTIONS,
            duration: seconds,
            workers: 1,
            headers: { authorization: `Bearer ${http.project.publicKey}`, 'content-type': 'application/json' },
            requests: [{ method: 'POST', path: '/v1/track', setupRequest }],
          });
        // Kept open while idle: with pg's default of 10 s, the reference's 64 connections closed together
        // inside phase (b), and their 64 backends exiting at once stalled the machine for 80–95 ms.
        const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS, idleTimeoutMillis: 0 });
        const reference = new Reference(pool, ref.project.id);
        try {
          const httpRate = await throughput(server.sql, http.project.id, cannon, reference);
          const paced = (seconds: number, rate: number) =>
            halfRateLatency(
              {
                url: `${server.url}/v1/track`,
                headers: { authorization: `Bearer ${http.project.publicKey}`, 'content-type': 'application/json' },
                body: trackBodies(),
                rate,
                seconds,
                connections: CONNECTIONS,
              },
              { sql: server.sql, databaseUrl, heraldPool: server.ctx.database.pool },
            );
          await latency(httpRate, paced, reference);
          console.log(`\n${loadAverage()} (other processes on this machine skew every figure)`);
        } finally {
          await pool.end();
        }
      } finally {
        await server.stop();
      }
    }),
  );
}

type Cannon = (seconds: number) => Promise<AutocannonResult>;

async function throughput(sql: Sql, projectId: string, cannon: Cannon, reference: Reference): Promise<number> {
  const seconds = SECONDS / ROUNDS;
  console.log(
    `\n(a) throughput: ${CONNECTIONS} concurrent clients, ${ROUNDS} alternating rounds of ${seconds.toFixed(1)} s each, new:existing contacts 1:3 (${fmt(EXISTING)} existing), data ${JSON.stringify(DATA)}`,
  );
  await cannon(2); // warm-up: connections, plans, JIT
  await reference.closedLoop(2);
  let httpEvents = 0;
  let sqlEvents = 0;
  let failed = 0;
  const p99s: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const before = await countEvents(sql, projectId);
    const r = await cannon(seconds);
    const h = (await countEvents(sql, projectId)) - before;
    const s = await reference.closedLoop(seconds);
    httpEvents += h;
    sqlEvents += s;
    failed += failures(r);
    p99s.push(r.latency.p99);
    console.log(`   round ${round}: HTTP ${fmt(h / seconds)} events/s, SQL ${fmt(s / seconds)} events/s (${((h / s) * 100).toFixed(1)} %)`);
  }
  const httpRate = httpEvents / (seconds * ROUNDS);
  const sqlRate = sqlEvents / (seconds * ROUNDS);
  const ratio = httpRate / sqlRate;
  console.log(`   POST /v1/track (HTTP):    ${fmt(httpRate)} events/s  (p99 per round ${p99s.join(' / ')} ms, ${failed} failed)`);
  console.log(`   same writes through pg:   ${fmt(sqlRate)} events/s`);
  console.log(`   ratio HTTP / SQL:         ${(ratio * 100).toFixed(1)} %  (target ≥ 100 %: ${verdict(ratio >= 1)})`);
  return httpRate;
}

/** The throughput phase's mix for the paced load: 1 new contact in 4 (unique through `[<id>]`), the rest existing. */
function trackBodies(): string[] {
  return Array.from({ length: 4096 }, (_, i) => {
    const email = i % 4 === 0 ? 'new-paced-[<id>]@bench.example.com' : `e${Math.floor(Math.random() * EXISTING)}@bench.example.com`;
    return JSON.stringify({ email, event: 'page_view', data: DATA });
  });
}

async function latency(maxRate: number, paced: (seconds: number, rate: number) => Promise<PacedResult>, reference: Reference): Promise<void> {
  // BENCH_RATE sets the rate instead, to compare two versions of Herald at one rate.
  const setRate = Number(process.env.BENCH_RATE);
  const rate = setRate || Math.max(1, Math.floor(maxRate / 2));
  console.log(
    `\n(b) latency at ${setRate ? 'BENCH_RATE' : 'half the maximum rate'}: ${fmt(rate)} requests/s over ${CONNECTIONS} connections, ${SECONDS} s, evenly paced`,
  );
  const half = await paced(SECONDS, rate);
  console.log(`   POST /v1/track (after 1 s of warm-up): p50 ${half.p50} ms, p99 ${half.p99} ms, max ${half.max} ms (${half.failed} failed)`);
  const floor = await reference.paced(SECONDS, rate);
  console.log(`   same writes through pg at the same rate: p50 ${floor.p50.toFixed(1)} ms, p99 ${floor.p99.toFixed(1)} ms`);
  console.log(`   p99 < 50 ms: ${verdict(half.p99 < 50)}`);
}

const failures = (r: AutocannonResult) => r.non2xx + r.errors + r.timeouts;

async function seedContacts(sql: Sql, projectId: string): Promise<void> {
  await sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 24, '0') || substr(md5($1), 1, 8), $1, 'e' || g || '@bench.example.com', true,
            '{"plan": "free", "visits": 1}'::jsonb, now(), now()
       FROM generate_series(0, $2::int - 1) AS g`,
    [projectId, EXISTING],
  );
}

async function countEvents(sql: Sql, projectId: string): Promise<number> {
  return (await sql<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE project_id = $1', [projectId]))[0].n;
}

/** The transaction /v1/track runs, issued directly: BEGIN, the same upsert and event insert statements, COMMIT. */
class Reference {
  private n = 0;
  private readonly pool: pg.Pool;
  private readonly projectId: string;

  constructor(pool: pg.Pool, projectId: string) {
    this.pool = pool;
    this.projectId = projectId;
  }

  private async once(client: pg.PoolClient): Promise<void> {
    this.n += 1;
    const email = this.n % 4 === 0 ? `ref-${this.n}@bench.example.com` : `e${Math.floor(Math.random() * EXISTING)}@bench.example.com`;
    const now = new Date();
    const { query } = upsertContactQuery(this.projectId, { email, data: DATA }, { defaultSubscribed: true, now });
    const { set, oneOff } = splitCustomData(DATA);
    await client.query('BEGIN');
    const contact = await client.query<{ id: string }>(query);
    await client.query({
      ...RECORD_EVENTS_SQL,
      values: recordEventsValues([
        { id: prefixedId('evt'), projectId: this.projectId, contactId: contact.rows[0].id, name: 'page_view', data: { ...set, ...oneOff }, createdAt: now },
      ]),
    });
    await client.query('COMMIT');
  }

  private async perConnection<T>(fn: (client: pg.PoolClient, index: number) => Promise<T>): Promise<T[]> {
    return Promise.all(
      Array.from({ length: CONNECTIONS }, async (_, i) => {
        const client = await this.pool.connect();
        try {
          return await fn(client, i);
        } finally {
          client.release();
        }
      }),
    );
  }

  /** As fast as 64 connections go; returns the number of transactions. */
  async closedLoop(seconds: number): Promise<number> {
    const until = performance.now() + seconds * 1000;
    const counts = await this.perConnection(async (client) => {
      let done = 0;
      while (performance.now() < until) {
        await this.once(client);
        done += 1;
      }
      return done;
    });
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Open loop at `rate` per second over 64 connections; latency from each transaction's scheduled start. */
  async paced(seconds: number, rate: number): Promise<{ p50: number; p99: number }> {
    const interval = (CONNECTIONS * 1000) / rate;
    const start = performance.now();
    const until = start + seconds * 1000;
    const latencies = (
      await this.perConnection(async (client, i) => {
        const out: number[] = [];
        for (let due = start + (i * interval) / CONNECTIONS; due < until; due += interval) {
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          await this.once(client);
          out.push(performance.now() - due);
        }
        return out;
      })
    )
      .flat()
      .sort((a, b) => a - b);
    const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
    return { p50: at(0.5), p99: at(0.99) };
  }
}
