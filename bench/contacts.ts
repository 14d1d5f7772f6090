import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/connect.ts';
import { encodeCursor } from '../src/http/cursor.ts';
import { upsertContactQuery } from '../src/modules/contacts/service.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';

/**
 * Contacts benchmark.
 *  1. Upsert throughput: POST /contacts from 64 concurrent autocannon clients vs the very same
 *     upsert SQL sent straight through `pg` on 64 connections (target: HTTP ≥ 60 % of SQL).
 *  2. List latency at depth: with 100,100 contacts, the first page vs the page after 100,000
 *     contacts (target: deep page ≤ 2× the first page), for both sort orders.
 */

type AutocannonResult = { '2xx': number; non2xx: number; errors: number; timeouts: number; duration: number };
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const CONNECTIONS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const DEPTH = 100_000;
const SAMPLES = 200;
const DATA = { plan: 'pro', seats: 3, signup: '2024-05-01' };

const quiet = { info: () => {}, debug: () => {}, error: () => {} };

export async function run(): Promise<void> {
  const cpus = os.cpus();
  console.log('Herald contacts benchmark');
  console.log(
    `machine: ${cpus[0]?.model ?? 'unknown cpu'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ${os.platform()} ${os.release()}`,
  );

  const dir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-'));
  await chmod(dir, 0o755); // the embedded server may run as the 'postgres' user
  const pgServer = await startEmbeddedPostgres(path.join(dir, 'pg'), quiet as never);
  try {
    await pgServer.ensureDatabase('herald_bench');
    const databaseUrl = pgServer.urlFor('herald_bench');
    const server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
    try {
      console.log(`postgres: ${(await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v"))[0].v} (embedded)\n`);
      await upsertThroughput(server.url, databaseUrl, server.api);
      await listLatency(server.api, server.sql);
    } finally {
      await server.stop();
    }
  } finally {
    await pgServer.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

async function upsertThroughput(url: string, databaseUrl: string, api: TestServer['api']): Promise<void> {
  console.log(`1. upsert throughput: ${CONNECTIONS} concurrent clients, ${SECONDS} s, distinct emails, data ${JSON.stringify(DATA)}`);
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
  await cannon(2); // warm-up
  const before = await count(httpProject.project.id);
  const http = await cannon(SECONDS);
  const httpRows = (await count(httpProject.project.id)) - before;
  const httpRate = httpRows / SECONDS;
  const failures = http.non2xx + http.errors + http.timeouts;

  // Reference: the same statement (upsertContactQuery) issued directly, one connection per client.
  const dialect = new PgDialect();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS });
  let n = 0;
  const direct = async (seconds: number) => {
    const until = performance.now() + seconds * 1000;
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
            const compiled = dialect.sqlToQuery(query);
            await client.query(compiled.sql, compiled.params);
            rows += 1;
          }
        } finally {
          client.release();
        }
      }),
    );
    return rows;
  };
  await direct(2); // warm-up
  const sqlRows = await direct(SECONDS);
  await pool.end();
  const sqlRate = sqlRows / SECONDS;

  console.log(`   POST /contacts (HTTP):  ${fmt(httpRate)} rows/s  (${http['2xx']} 2xx, ${failures} failed)`);
  console.log(`   same SQL through pg:    ${fmt(sqlRate)} rows/s`);
  const ratio = httpRate / sqlRate;
  console.log(`   ratio HTTP / SQL:       ${(ratio * 100).toFixed(1)} %  (target ≥ 60 %: ${ratio >= 0.6 ? 'met' : 'NOT met'})\n`);
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
    const [expectedNext] = await sql<{ id: string }>(
      `SELECT id FROM contacts WHERE project_id = $1 ORDER BY ${o.order} OFFSET ${DEPTH} LIMIT 1`,
      [b.project.id],
    );
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
    console.log(
      `     ratio deep / first: ${ratio.toFixed(2)}×  (target ≤ 2×: ${ratio <= 2 ? 'met' : 'NOT met'});  deep / second: ${(deep / second).toFixed(2)}×`,
    );
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

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
