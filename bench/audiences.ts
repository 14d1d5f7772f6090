import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { compileCondition, parseCondition } from '../src/conditions/index.ts';
import { startEmbeddedPostgres } from '../src/db/connect.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { COVERAGE_EXACT_UP_TO, customFieldTypes } from '../src/modules/contacts/fields.ts';

/**
 * Audiences benchmark (a): counting a segment-style audience over 1,000,000 contacts.
 *
 * The tree `data.plan equals 'pro' AND data.score greaterThan 50 AND createdAt within 30 days`
 * is compiled by the condition engine (compileCondition, field types read from the project as
 * in production) and counted; the reference is the same count written by hand in SQL, on the
 * same database. Targets: compiled ≤ 1.5× the hand-written query, and under 1 s.
 *
 * Then (information, no target) GET /contacts/fields against the exact coverage counted by hand.
 *
 * Indexes: only the schema's own. The `within` filter on createdAt uses the contacts
 * (project_id, created_at, id) index; no index on data keys is created (which data keys deserve
 * an expression index is a per-deployment decision).
 */

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 21);
const quiet = { info: () => {}, debug: () => {}, error: () => {} };

const TREE = {
  logic: 'AND',
  groups: [
    {
      filters: [
        { field: 'data.plan', operator: 'equals', value: 'pro' },
        { field: 'data.score', operator: 'greaterThan', value: 50 },
        { field: 'createdAt', operator: 'within', value: 30, unit: 'days' },
      ],
    },
  ],
};

export async function run(): Promise<void> {
  const cpus = os.cpus();
  console.log('Herald audiences benchmark');
  console.log(
    `machine: ${cpus[0]?.model ?? 'unknown cpu'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ${os.platform()} ${os.release()}`,
  );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-'));
  await chmod(dir, 0o755); // the embedded server may run as the 'postgres' user
  const pgServer = await startEmbeddedPostgres(path.join(dir, 'pg'), quiet as never);
  try {
    await pgServer.ensureDatabase('herald_bench');
    const server = await startTestServer({}, { databaseUrl: pgServer.urlFor('herald_bench') });
    try {
      const [{ v }] = await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v");
      const [{ workers }] = await server.sql<{ workers: string }>("SELECT current_setting('max_parallel_workers_per_gather') AS workers");
      console.log(`postgres: ${v} (embedded), max_parallel_workers_per_gather ${workers}\n`);
      await countBenchmark(server);
    } finally {
      await server.stop();
    }
  } finally {
    await pgServer.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

type Server = Awaited<ReturnType<typeof startTestServer>>;

async function countBenchmark(server: Server): Promise<void> {
  const b = await bootstrap(server.api, 'bench-audiences');
  const projectId = b.project.id;
  const now = new Date();
  console.log(`loading ${fmt(CONTACTS)} contacts (one INSERT … SELECT generate_series)`);
  const t0 = performance.now();
  // plan: free/pro/team/enterprise in turn; score 0..99 spread by a multiplicative hash;
  // created_at spread over two years before now, down to the second.
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'user' || g || '@bench.example.com', g % 10 <> 0,
            jsonb_build_object('plan', (ARRAY['free', 'pro', 'team', 'enterprise'])[g % 4 + 1], 'score', (g::bigint * 7919) % 100,
                               'company', 'Company ' || (g % 5000)),
            $2::timestamptz - ((g::bigint * 104729) % (730 * 86400)) * interval '1 second',
            $2::timestamptz - ((g::bigint * 104729) % (730 * 86400)) * interval '1 second'
       FROM generate_series(1, $3::int) AS g`,
    [projectId, now.toISOString(), CONTACTS],
  );
  await server.sql(`INSERT INTO contact_fields (project_id, key, type) VALUES ($1, 'plan', 'string'), ($1, 'score', 'number'), ($1, 'company', 'string')`, [
    projectId,
  ]);
  await server.sql('VACUUM ANALYZE contacts');
  console.log(`   loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);

  const db = server.ctx.database.db;
  const iso = now.toISOString();
  const first = await measure(
    server,
    projectId,
    now,
    '1. count',
    TREE,
    sql`
      SELECT count(*)::int AS n FROM contacts
       WHERE project_id = ${projectId} AND data->>'plan' = 'pro' AND (data->>'score')::numeric > 50
         AND created_at >= ${iso}::timestamptz - interval '30 days' AND created_at <= ${iso}::timestamptz`,
  );
  console.log(`   target ≤ 1.5×: ${first.ratio <= 1.5 ? 'met' : 'NOT met'};  under 1 s: ${first.compiledMs < 1000 ? 'met' : 'NOT met'}`);
  const where = await compileCondition(db, projectId, parseCondition(TREE), { types: await customFieldTypes(db, projectId), now });
  const plan = await db.execute<{ 'QUERY PLAN': string }>(sql`EXPLAIN SELECT count(*) FROM contacts AS c WHERE c.project_id = ${projectId} AND ${where}`);
  console.log('   plan of the compiled count:');
  for (const row of plan.rows) console.log(`     ${row['QUERY PLAN'].slice(0, 150)}`);

  // For information: the same data filters without the createdAt window scan every contact.
  const scanTree = { logic: 'AND', groups: [{ filters: TREE.groups[0].filters.slice(0, 2) }] };
  await measure(
    server,
    projectId,
    now,
    '\n2. (information) without the createdAt filter, a full scan',
    scanTree,
    sql`
      SELECT count(*)::int AS n FROM contacts
       WHERE project_id = ${projectId} AND data->>'plan' = 'pro' AND (data->>'score')::numeric > 50`,
  );
  await fieldsBenchmark(server, b);
}

/**
 * GET /contacts/fields through HTTP (coverage from a sample past COVERAGE_EXACT_UP_TO contacts)
 * against the exact coverage of the same three fields written by hand in SQL: one scan with a
 * count per field, the cheapest exact form for a few fields. Prints the largest difference.
 */
async function fieldsBenchmark(server: Server, b: Awaited<ReturnType<typeof bootstrap>>): Promise<void> {
  const keys = ['company', 'plan', 'score'];
  const exact = async () => {
    const [row] = await server.sql<Record<string, number>>(
      `SELECT count(*)::float AS total, ${keys.map((k) => `count(*) FILTER (WHERE jsonb_typeof(data -> '${k}') <> 'null')::float AS "${k}"`).join(', ')}
         FROM contacts WHERE project_id = $1`,
      [b.project.id],
    );
    return Object.fromEntries(keys.map((k) => [`data.${k}`, row[k] / row.total]));
  };
  const listed = async () => {
    const res = await b.sk.get('/contacts/fields');
    if (res.status !== 200) throw new Error(`GET /contacts/fields: ${res.status} ${res.text}`);
    return Object.fromEntries(
      res.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).map((f: { field: string; coverage: number }) => [f.field, f.coverage]),
    );
  };
  const [want, got] = [await exact(), await listed()];
  const error = Math.max(...Object.keys(want).map((k) => Math.abs(want[k] - got[k])));
  console.log(`\n3. GET /contacts/fields (${keys.length} custom fields), coverage past ${fmt(COVERAGE_EXACT_UP_TO)} contacts from a sample`);
  console.log(`   largest coverage difference from the exact share: ${(error * 100).toFixed(3)} points`);
  const rounds = Math.max(3, Math.ceil(SAMPLES / 3));
  const [listedMs, exactMs] = await interleavedMedians([listed, exact], rounds, 1);
  console.log(`   GET /contacts/fields through HTTP:         median ${listedMs.toFixed(1)} ms over ${rounds} runs`);
  console.log(`   exact coverage by hand in SQL:             median ${exactMs.toFixed(1)} ms`);
  console.log(`   ratio listing / exact: ${(listedMs / exactMs).toFixed(2)}×`);
}

/** Median time of the compiled tree (compileCondition + count) and of the hand-written count, interleaved. */
async function measure(
  server: Server,
  projectId: string,
  now: Date,
  title: string,
  tree: unknown,
  handSql: ReturnType<typeof sql>,
): Promise<{ compiledMs: number; handMs: number; ratio: number }> {
  const db = server.ctx.database.db;
  const condition = parseCondition(tree);
  const compiled = async () => {
    const where = await compileCondition(db, projectId, condition, { types: await customFieldTypes(db, projectId), now });
    const { rows } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM contacts AS c WHERE c.project_id = ${projectId} AND ${where}`);
    return rows[0].n;
  };
  const handWritten = async () => (await db.execute<{ n: number }>(handSql)).rows[0].n;

  const expected = await handWritten();
  const got = await compiled();
  if (got !== expected) throw new Error(`counts differ: compiled ${got}, hand-written ${expected}`);
  console.log(`${title}: ${JSON.stringify((tree as typeof TREE).groups[0].filters)}`);
  console.log(`   matching contacts: ${fmt(expected)} of ${fmt(CONTACTS)}`);

  const [compiledMs, handMs] = await interleavedMedians([compiled, handWritten], SAMPLES, 3);
  const ratio = compiledMs / handMs;
  console.log(`   compiled tree (compileCondition + count):  median ${compiledMs.toFixed(1)} ms over ${SAMPLES} runs`);
  console.log(`   hand-written SQL count:                    median ${handMs.toFixed(1)} ms`);
  console.log(`   ratio compiled / hand-written: ${ratio.toFixed(2)}×`);
  return { compiledMs, handMs, ratio };
}

/**
 * The median time of each of `fns` over `rounds` runs, called in turn so that all see the same
 * cache and machine state, after `warmUp` rounds that are not timed.
 */
async function interleavedMedians(fns: (() => Promise<unknown>)[], rounds: number, warmUp: number): Promise<number[]> {
  const times = fns.map(() => [] as number[]);
  for (let i = 0; i < warmUp + rounds; i++) {
    for (const [k, fn] of fns.entries()) {
      const t = performance.now();
      await fn();
      if (i >= warmUp) times[k].push(performance.now() - t);
    }
  }
  return times.map(median);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
