import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { encodeCursor } from '../src/http/cursor.ts';
import { upsertContactQuery } from '../src/modules/contacts/service.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { autocannon, fmt, printMachine, verdict, withBenchDatabase } from './lib.ts';

/**
 * Contacts benchmark.
 *  1. Upsert throughput: POST /contacts from 64 concurrent autocannon clients vs the very same
 *     upsert SQL sent straight through `pg` on 64 connections (target: HTTP ≥ 60 % of SQL).
 *  2. List latency at depth: with 100,100 contacts, the first page vs the page after 100,000
 *     contacts (target: deep page ≤ 2× the first page), for both sort orders.
 */

const CONNECTIONS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const DEPTH = 100_000;
const SAMPLES = 200;
const DATA = { plan: 'pro', seats: 3, signup: '2024-05-01' };

export async function run(): Promise<void> {
  printMachine('Herald contacts benchmark');
  await withBenchDatabase(async (databaseUrl) => {
    const server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
    try {
      console.log(`postgres: ${(await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v"))[0].v} (embedded)\n`);
      await upsertThroughput(server.url, databaseUrl, server.api);
      await listLatency(server.api, server.sql);
    } finally {
      await server.stop();
    }
  });
}

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

async function upsertThroughput(url: string, databaseUrl: string, api: TestServer['api']): Promise<void> {
  console.log(
    `1. upsert throughput: ${CONNECTIONS} concurrent clients, ${SECONDS} s each side in alternating 2 s rounds, distinct emails, data ${JSON.stringify(DATA)}`,
  );
  const httpProject = await bootstrap(api, 'bench-http');
  const sqlProject = await bootstrap(api, 'bench-sql');
  const count = async (projectId: string) => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [projectId]);
    await client.end();
    return rows[0].n;
  };

  // HTTP: the load generator runs in a worker thread so it does not share the server's event loop.
  const cannon = (seconds: number) =>
    autocannon({
      url: `${url}/contacts`,
      method: 'POST',
      connections: CONNECTIONS,
      duration: seconds,
      workers: 1,
      idReplacement: true,
      headers: { authorization: `Bearer ${httpProject.project.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'u[<id>]@bench.example.com', data: DATA }),
    });

  // Reference: the same statement (upsertContactQuery: the same named statement and parameters)
  // issued directly, one connection per client.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS });
  let n = 0;
  const direct = async (seconds: number) => {
    const started = performance.now();
    const until = started + seconds * 1000;
    let rows = 0;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        const client = await pool.connect();
        try {
          while (performance.now() < until) {
            const { query } = upsertContactQuery(
              sqlProject.project.id,
              { email: `r${n++}@bench.example.com`, data: DATA },
              { defaultSubscribed: true, now: new Date() },
            );
            await client.query(query);
            rows += 1;
          }
        } finally {
          client.release();
        }
      }),
    );
    return { rows, seconds: (performance.now() - started) / 1000 };
  };

  await cannon(2); // warm-up
  await direct(2);
  // Alternating rounds, so background load on the machine weighs on both sides alike.
  const ROUND = 2;
  const totals = { httpRows: 0, httpSeconds: 0, failures: 0, sqlRows: 0, sqlSeconds: 0 };
  for (let done = 0; done < SECONDS; done += ROUND) {
    const http = await cannon(ROUND);
    totals.httpRows += http['2xx'];
    totals.httpSeconds += http.duration;
    totals.failures += http.non2xx + http.errors + http.timeouts;
    const sql = await direct(ROUND);
    totals.sqlRows += sql.rows;
    totals.sqlSeconds += sql.seconds;
  }
  await pool.end();
  const httpStored = await count(httpProject.project.id);
  const httpRate = totals.httpRows / totals.httpSeconds;
  const sqlRate = totals.sqlRows / totals.sqlSeconds;
  const failures = totals.failures;

  console.log(`   POST /contacts (HTTP):  ${fmt(httpRate)} rows/s  (${totals.httpRows} 2xx, ${failures} failed, ${httpStored} contacts stored incl. warm-up)`);
  console.log(`   same SQL through pg:    ${fmt(sqlRate)} rows/s`);
  const ratio = httpRate / sqlRate;
  console.log(`   ratio HTTP / SQL:       ${(ratio * 100).toFixed(1)} %  (target ≥ 60 %: ${verdict(ratio >= 0.6)})\n`);
}

async function listLatency(api: TestServer['api'], sql: TestServer['sql']): Promise<void> {
  const total = DEPTH + 100;
  console.log(`2. list latency: ${fmt(total)} contacts, limit 20, median of ${SAMPLES} sequential requests`);
  const b = await bootstrap(api, 'bench-list');
  const t0 = performance.now();
  await sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'user' || g || '@bench.example.com', g % 10 <> 0,
            jsonb_build_object('plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END, 'n', g),
            timestamptz '2024-01-01' + g * interval '1 second', timestamptz '2024-01-01' + g * interval '1 second'
       FROM generate_series(1, $2::int) AS g`,
    [b.project.id, total],
  );
  await sql('ANALYZE contacts');
  console.log(`   loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const orders = [
    { name: 'sort=createdAt&dir=desc', order: 'created_at DESC, id DESC', value: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')` },
    { name: 'sort=email&dir=asc', order: 'email ASC', value: 'email' },
  ];
  for (const o of orders) {
    const [at] = await sql<{ id: string; v: string }>(
      `SELECT id, ${o.value} AS v FROM contacts WHERE project_id = $1 ORDER BY ${o.order} OFFSET ${DEPTH - 1} LIMIT 1`,
      [b.project.id],
    );
    const [expectedNext] = await sql<{ id: string }>(`SELECT id FROM contacts WHERE project_id = $1 ORDER BY ${o.order} OFFSET ${DEPTH} LIMIT 1`, [
      b.project.id,
    ]);
    const cursor = encodeCursor(at.v, at.id);
    const firstPage = await api.as({ key: b.project.secretKey }).get<ListBody & { cursor: string }>(`/contacts?${o.name}`);
    const first = await median(b.sk, `/contacts?${o.name}`, (body) => body.total === total && body.data.length === 20);
    // The second page is the same query without the count: the fair baseline for depth.
    const second = await median(b.sk, `/contacts?${o.name}&cursor=${firstPage.body.cursor}`, (body) => body.data.length === 20);
    const deep = await median(
      b.sk,
      `/contacts?${o.name}&cursor=${cursor}`,
      (body) => body.data.length === 20 && body.data[0].id === expectedNext.id && body.total === 0,
    );
    console.log(
      `   ${o.name}: first page ${first.toFixed(2)} ms (with total), second page ${second.toFixed(2)} ms, after ${fmt(DEPTH)} contacts ${deep.toFixed(2)} ms`,
    );
    const ratio = deep / first;
    console.log(`     ratio deep / first: ${ratio.toFixed(2)}×  (target ≤ 2×: ${verdict(ratio <= 2)});  deep / second: ${(deep / second).toFixed(2)}×`);
  }
}

type ListBody = { data: { id: string }[]; total: number };

async function median(api: TestServer['api'], url: string, check: (body: ListBody) => boolean): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < SAMPLES + 20; i++) {
    const t = performance.now();
    const res = await api.get<ListBody>(url);
    const elapsed = performance.now() - t;
    if (res.status !== 200 || !check(res.body)) throw new Error(`unexpected response for ${url}: ${res.text.slice(0, 300)}`);
    if (i >= 20) times.push(elapsed); // the first 20 warm caches and plans
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
