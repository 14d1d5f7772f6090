import { performance } from 'node:perf_hooks';
import { maintainEventPartitions } from '../src/modules/events/partitions.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import type { Api, Res } from '../test/helpers/http.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { autocannon, fmt, loadAverage, printMachine, withBenchDatabase, withSetupRequest } from './lib.ts';

/**
 * Growth benchmark (issue 15): does a big events table slow the hot paths down?
 *  (a) POST /v1/track throughput, 64 concurrent clients (public key), existing contacts.
 *  (b) A contact's timeline: GET /events/contact/:id (first page, which counts the contact's
 *      events, and the second page by cursor), median and p95 of sequential requests.
 *  (c) The project-wide GET /events first page, whose `total` is every event of the project (and
 *      with ?name=, every event of that name), median and p95 of sequential requests; the total is
 *      checked against a count of the events; its second page (no total) shows what the page alone
 *      costs.
 * Both run on an empty events table, then again after `--events=N` events (default 20,000,000)
 * spread over the last 24 months are generated in SQL, and the loaded/empty ratios are printed.
 * The timeline contact has the same 200 events in both phases; the generated ones belong to
 * 20,000 other contacts of the same project.
 * BENCH_SECONDS (default 5) is the length of each throughput phase.
 */

const CONNECTIONS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONTACTS = 20_000;
const TIMELINE_EVENTS = 200;
const TIMELINE_REQUESTS = 200;
const FILL_CHUNK = 1_000_000;
const MONTHS = 24;

const SETUP_REQUEST = `
let n = 0;
module.exports = function setupRequest(req) {
  n += 1;
  req.body = JSON.stringify({ email: 'g' + (n % ${CONTACTS}) + '@bench.example.com', event: 'page_view', data: { path: '/pricing' } });
  return req;
};
`;

type Sql = <T extends Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;
type Figures = { track: number; trackP99: number; first: Latency; second: Latency; list: Latency; listByName: Latency; listSecond: Latency; counters: Latency };
type Latency = { p50: number; p95: number };

export async function run(args: string[]): Promise<void> {
  const total = Number(args.find((a) => a.startsWith('--events='))?.slice('--events='.length) ?? 20_000_000);
  if (!Number.isInteger(total) || total < 0) throw new Error('--events=N takes a whole number');
  printMachine('Herald growth benchmark');
  await withSetupRequest(SETUP_REQUEST, (setupRequest) =>
    withBenchDatabase(async (databaseUrl) => {
      const server = await startTestServer({ PROCESS_ROLE: 'api', API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
      try {
        const [{ v }] = await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v");
        console.log(`postgres: ${v} (embedded); ${loadAverage()}`);
        // The months an install running for two years has: the job created each as its time came.
        for (let m = MONTHS; m > 0; m--) {
          const now = new Date();
          const then = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - m, 15));
          await maintainEventPartitions({ ...server.ctx, clock: { now: () => then } });
        }
        const b = await bootstrap(server.api, 'bench-growth');
        const contact = await seed(server.sql, b.project.id);
        const track = () =>
          autocannon({
            url: server.url,
            connections: CONNECTIONS,
            duration: SECONDS,
            workers: 1,
            headers: { authorization: `Bearer ${b.project.publicKey}`, 'content-type': 'application/json' },
            requests: [{ method: 'POST', path: '/v1/track', setupRequest }],
          });
        const measure = async (label: string): Promise<Figures> => {
          // As autovacuum would have over the months: otherwise the loaded phase races its first
          // pass over millions of fresh rows (setting their visibility bits) on this 2-core machine.
          await server.sql('VACUUM (ANALYZE) events');
          await track(); // warm-up: connections, plans, caches
          const r = await track();
          const failed = r.non2xx + r.errors + r.timeouts;
          // The tracks above wrote tens of thousands of events into a partition analyzed while
          // nearly empty; autovacuum analyzes it within a minute (migration 0029), a run sooner.
          await server.sql('ANALYZE events');
          const first = await timeline(b.sk, contact);
          const second = await timeline(b.sk, contact, await nextCursor(b.sk, `/events/contact/${contact}?limit=50`));
          const list = await projectList(b.sk, '/events?limit=50', await countEvents(server.sql, b.project.id));
          const listByName = await projectList(b.sk, '/events?limit=50&name=page_view', await countEvents(server.sql, b.project.id, 'page_view'));
          const counters = await counterSum(server.sql, b.project.id);
          const listSecond = await latency(
            b.sk,
            `/events?limit=50&cursor=${encodeURIComponent(await nextCursor(b.sk, '/events?limit=50'))}`,
            (res) => res.status === 200,
          );
          console.log(`\n${label}: ${fmt(await countEvents(server.sql))} events; ${loadAverage()}`);
          console.log(`   POST /v1/track: ${fmt(r.requests.average)} requests/s, p99 ${r.latency.p99} ms (${failed} failed)`);
          console.log(`   timeline first page:  p50 ${first.p50.toFixed(2)} ms, p95 ${first.p95.toFixed(2)} ms`);
          console.log(`   timeline second page: p50 ${second.p50.toFixed(2)} ms, p95 ${second.p95.toFixed(2)} ms`);
          console.log(`   GET /events first page (total exact): p50 ${list.p50.toFixed(2)} ms, p95 ${list.p95.toFixed(2)} ms`);
          console.log(`   GET /events?name= first page (total exact): p50 ${listByName.p50.toFixed(2)} ms, p95 ${listByName.p95.toFixed(2)} ms`);
          console.log(`   GET /events second page (no total): p50 ${listSecond.p50.toFixed(2)} ms, p95 ${listSecond.p95.toFixed(2)} ms`);
          console.log(`   its total alone (the counters' sum in SQL): p50 ${counters.p50.toFixed(3)} ms, p95 ${counters.p95.toFixed(3)} ms`);
          return { track: r.requests.average, trackP99: r.latency.p99, first, second, list, listByName, listSecond, counters };
        };

        const empty = await measure('empty table');
        const started = performance.now();
        await fill(server.sql, b.project.id, total);
        console.log(`\nfilled ${fmt(total)} events over ${MONTHS} months in ${((performance.now() - started) / 1000).toFixed(0)} s`);
        const loaded = await measure('loaded table');
        const [{ size }] = await server.sql<{ size: string }>(
          `SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) AS size FROM pg_inherits WHERE inhparent = 'events'::regclass`,
        );
        console.log(`   events partitions on disk: ${size}`);
        console.log('\nratio loaded / empty (1.00 = unchanged; for latency, lower is faster):');
        console.log(`   /v1/track throughput:  ${(loaded.track / empty.track).toFixed(2)}`);
        console.log(`   timeline first page:   ${(loaded.first.p50 / empty.first.p50).toFixed(2)} (p50)`);
        console.log(`   timeline second page:  ${(loaded.second.p50 / empty.second.p50).toFixed(2)} (p50)`);
        console.log(`   GET /events first page: ${(loaded.list.p50 / empty.list.p50).toFixed(2)} (p50)`);
        console.log(`   GET /events?name= first page: ${(loaded.listByName.p50 / empty.listByName.p50).toFixed(2)} (p50)`);
        console.log(`   GET /events second page: ${(loaded.listSecond.p50 / empty.listSecond.p50).toFixed(2)} (p50)`);
        console.log(`   its total alone:       ${(loaded.counters.p50 / empty.counters.p50).toFixed(2)} (p50)`);
        console.log(`\n${loadAverage()} (other processes on this machine skew every figure)`);
      } finally {
        await server.stop();
      }
    }),
  );
}

/** The project's contacts, and the timeline contact with its events spread over the 24 months. Returns its id. */
async function seed(sql: Sql, projectId: string): Promise<string> {
  await sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 24, '0') || substr(md5($1), 1, 8), $1, 'g' || g || '@bench.example.com', true, '{}'::jsonb, now(), now()
       FROM generate_series(0, $2::int) AS g`,
    [projectId, CONTACTS],
  );
  const [{ id }] = await sql<{ id: string }>(`SELECT id FROM contacts WHERE project_id = $1 AND email = $2`, [projectId, `g${CONTACTS}@bench.example.com`]);
  await sql(
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT 'evt_' || md5('timeline' || g), $1, $2, 'page_view', '{"path": "/pricing"}'::jsonb,
            now() - interval '${MONTHS} months' * (g::float8 / $3)
       FROM generate_series(1, $3::int) AS g`,
    [projectId, id, TIMELINE_EVENTS],
  );
  return id;
}

/**
 * `total` events in chunks of a million, oldest first (as they would have arrived), spread evenly
 * over the last 24 months and over the other contacts.
 */
async function fill(sql: Sql, projectId: string, total: number): Promise<void> {
  for (let from = 0; from < total; from += FILL_CHUNK) {
    const to = Math.min(total, from + FILL_CHUNK) - 1;
    const t0 = performance.now();
    await sql(
      `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT 'evt_' || md5('fill' || g), $1, 'cnt_' || lpad(to_hex(g % ${CONTACTS}), 24, '0') || substr(md5($1), 1, 8),
              (ARRAY['page_view', 'signup', 'purchase', 'email.opened'])[1 + g % 4], '{"path": "/pricing"}'::jsonb,
              now() - interval '${MONTHS} months' * (1 - g::float8 / $4)
         FROM generate_series($2::bigint, $3::bigint) AS g`,
      [projectId, from, to, total],
    );
    console.log(`   ${fmt(to + 1)} events (${((performance.now() - t0) / 1000).toFixed(1)} s for this million)`);
  }
}

/** Median and p95 of TIMELINE_REQUESTS sequential runs of `fn`. */
async function timed(fn: () => Promise<void>): Promise<Latency> {
  const times: number[] = [];
  for (let i = 0; i < TIMELINE_REQUESTS; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(times.length / 2)], p95: times[Math.floor(times.length * 0.95)] };
}

/** Latency of sequential GETs of `path`, each answer checked. */
async function latency(sk: Api, path: string, check: (res: Res) => boolean): Promise<Latency> {
  return timed(async () => {
    const res = await sk.get(path);
    if (!check(res)) throw new Error(`${path}: ${res.status} ${res.text.slice(0, 200)}`);
  });
}

/** GET /events/contact/:id requests (one page of 50, the default sort). */
async function timeline(sk: Api, contactId: string, cursor?: string): Promise<Latency> {
  const url = `/events/contact/${contactId}?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
  return latency(sk, url, (res) => res.status === 200 && res.body.data.length === 50);
}

/** The statement behind the first page's `total` (events/counts.ts), timed in SQL. */
async function counterSum(sql: Sql, projectId: string): Promise<Latency> {
  return timed(async () => {
    await sql('SELECT coalesce(sum(count), 0)::bigint AS n FROM event_counts WHERE project_id = $1', [projectId]);
  });
}

async function nextCursor(sk: Api, path: string): Promise<string> {
  return (await sk.get(path)).body.cursor as string;
}

/** GET /events first pages, whose `total` must be the events counted. */
async function projectList(sk: Api, path: string, expected: number): Promise<Latency> {
  return latency(sk, path, (res) => res.status === 200 && res.body.total === expected);
}

async function countEvents(sql: Sql, projectId?: string, name?: string): Promise<number> {
  const where = projectId === undefined ? '' : name === undefined ? ' WHERE project_id = $1' : ' WHERE project_id = $1 AND name = $2';
  const values = [projectId, name].filter((v) => v !== undefined);
  return (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM events${where}`, values))[0].n;
}
