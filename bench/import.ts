import { performance } from 'node:perf_hooks';
import { parse } from 'csv-parse/sync';
import pg from 'pg';
import { prefixedId } from '../src/db/ids.ts';
import { cellValue } from '../src/modules/contacts/import/csv.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { fmt, importCsv, printMachine, verdict, withBenchDatabase } from './lib.ts';

/**
 * CSV import benchmark: a 5 MB file (about 50,000 rows, half of them contacts that already exist)
 * imported end to end — upload, queue, parse, batched upserts, polled until `completed` — vs a
 * reference that loads the same rows in one statement (`INSERT … SELECT FROM jsonb_to_recordset`
 * into a temporary table: pg-copy-streams, needed for `COPY … FROM STDIN`, is not a dependency)
 * and merges them into `contacts` with one more statement. The reference's time includes parsing
 * the CSV in JS (what COPY would do server-side). Target: import ≥ 50 % of the reference's rows/s.
 */

const MB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HEADER = ['email', 'first_name', 'last_name', 'company', 'plan', 'seats', 'active', 'signup', 'city', 'score'];
const CITIES = ['Paris', 'Berlin', 'Lisbon', 'Oslo', 'Rome', 'Madrid', 'Vienna', 'Prague'];

/** ~100-byte rows up to 5 MB, and the number of rows. */
function buildCsv(): { csv: string; rows: number } {
  const lines = [`${HEADER.join(',')}\n`];
  let size = lines[0].length;
  for (let i = 0; ; i++) {
    const line =
      `person${i}@bench-import.example.com,First${i},Last${i % 977},Company ${i % 313} Ltd,${i % 2 ? 'pro' : 'free'},` +
      `${i % 50},${i % 3 === 0},2024-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')},` +
      `${CITIES[i % CITIES.length]},${(i % 1000) / 10}\n`;
    if (size + line.length > 5 * MB) return { csv: lines.join(''), rows: lines.length - 1 };
    lines.push(line);
    size += line.length;
  }
}

export async function run(): Promise<void> {
  printMachine('Herald CSV import benchmark');
  await withBenchDatabase(async (databaseUrl) => {
    const server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
    try {
      console.log(`postgres: ${(await server.sql<{ v: string }>("SELECT current_setting('server_version') AS v"))[0].v} (embedded)\n`);
      const { csv, rows } = buildCsv();
      const existing = Math.floor(rows / 2);
      console.log(
        `file: ${(Buffer.byteLength(csv) / MB).toFixed(2)} MB, ${fmt(rows)} rows, ${HEADER.length} columns; ${fmt(existing)} of them already contacts`,
      );

      const importRates: number[] = [];
      const referenceRates: number[] = [];
      const databaseRates: number[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        // Fresh projects each round; the order alternates so neither side always runs on warmer caches.
        const importProject = await bootstrap(server.api, `bench-import-${round}`);
        const referenceProject = await bootstrap(server.api, `bench-reference-${round}`);
        for (const p of [importProject, referenceProject]) await precreate(server.sql, p.project.id, existing);
        await server.sql('ANALYZE contacts');
        const api = server.api.as({ key: importProject.project.secretKey });
        let importMs: number;
        let reference: ReferenceTimes;
        if (round % 2 === 1) {
          importMs = await importThroughApi(api, csv, rows);
          reference = await referenceLoad(databaseUrl, referenceProject.project.id, csv);
        } else {
          reference = await referenceLoad(databaseUrl, referenceProject.project.id, csv);
          importMs = await importThroughApi(api, csv, rows);
        }
        await checkSameContacts(server.sql, importProject.project.id, referenceProject.project.id, rows);
        importRates.push(rows / (importMs / 1000));
        referenceRates.push(rows / (reference.totalMs / 1000));
        databaseRates.push(rows / ((reference.loadMs + reference.mergeMs) / 1000));
        console.log(
          `round ${round}: import ${(importMs / 1000).toFixed(2)} s (${fmt(rows / (importMs / 1000))} rows/s); ` +
            `reference ${(reference.totalMs / 1000).toFixed(2)} s (${fmt(rows / (reference.totalMs / 1000))} rows/s: ` +
            `parse ${(reference.parseMs / 1000).toFixed(2)} s, load ${(reference.loadMs / 1000).toFixed(2)} s, merge ${(reference.mergeMs / 1000).toFixed(2)} s)`,
        );
      }
      // Rounds share the machine's noise, so the ratio is taken per round, then the median.
      const ratios = importRates.map((r, i) => r / referenceRates[i]);
      const dbRatios = importRates.map((r, i) => r / databaseRates[i]);
      const ratio = median(ratios);
      console.log(`\n   import, upload → completed (median):       ${fmt(median(importRates))} rows/s`);
      console.log(`   reference, parse + load + merge (median):  ${fmt(median(referenceRates))} rows/s`);
      console.log(`   ratio import / reference (median of rounds): ${(ratio * 100).toFixed(1)} %  (target ≥ 50 %: ${verdict(ratio >= 0.5)})`);
      console.log(`   (vs the reference's load + merge alone, ${fmt(median(databaseRates))} rows/s: ${(median(dbRatios) * 100).toFixed(1)} %)`);
    } finally {
      await server.stop();
    }
  });
}

type Sql = Awaited<ReturnType<typeof startTestServer>>['sql'];
type Api = Awaited<ReturnType<typeof startTestServer>>['api'];

/** The first `n` rows' contacts, with some data of their own and half of them unsubscribed. */
async function precreate(sql: Sql, projectId: string, n: number): Promise<void> {
  await sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT 'cnt_' || md5($1 || g), $1, 'person' || g || '@bench-import.example.com', g % 2 = 0,
            jsonb_build_object('source', 'crm', 'plan', 'trial')
       FROM generate_series(0, $2::int - 1) AS g`,
    [projectId, n],
  );
}

async function checkSameContacts(sql: Sql, importProjectId: string, referenceProjectId: string, rows: number): Promise<void> {
  const [r] = await sql<{ a: number; b: number; same: number }>(
    `SELECT (SELECT count(*) FROM contacts WHERE project_id = $1)::int AS a,
            (SELECT count(*) FROM contacts WHERE project_id = $2)::int AS b,
            (SELECT count(*) FROM contacts a JOIN contacts b ON b.project_id = $2 AND b.email = a.email
              WHERE a.project_id = $1 AND a.data = b.data AND a.subscribed = b.subscribed)::int AS same`,
    [importProjectId, referenceProjectId],
  );
  if (r.a !== rows || r.b !== rows || r.same !== rows) throw new Error(`results differ: ${JSON.stringify(r)}, ${rows} rows`);
}

/** Upload → polled until `completed`: the time a user waits, in ms. */
async function importThroughApi(api: Api, csv: string, rows: number): Promise<number> {
  const t0 = performance.now();
  const job = await importCsv(api, csv, 10);
  const ms = performance.now() - t0;
  if (job.imported + job.updated !== rows || job.skipped !== 0) throw new Error(`unexpected job counts: ${JSON.stringify(job)}`);
  return ms;
}

/** Parse in JS (same cell rules), one statement into a temporary table, one merge statement. */
type ReferenceTimes = { parseMs: number; loadMs: number; mergeMs: number; totalMs: number };

async function referenceLoad(databaseUrl: string, projectId: string, csv: string): Promise<ReferenceTimes> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const t0 = performance.now();
    const [header, ...records] = parse(csv, { bom: true }) as string[][];
    const rows = records.map((cells) => {
      const data: Record<string, unknown> = {};
      for (let i = 1; i < header.length; i++) data[header[i]] = cellValue(cells[i]);
      return { id: prefixedId('cnt'), email: cells[0].trim().toLowerCase(), data };
    });
    const payload = JSON.stringify(rows);
    const t1 = performance.now();
    await client.query('BEGIN');
    await client.query('CREATE TEMP TABLE staged (id text, email text, data jsonb) ON COMMIT DROP');
    await client.query('INSERT INTO staged SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(id text, email text, data jsonb)', [payload]);
    const t2 = performance.now();
    await client.query(
      `INSERT INTO contacts AS c (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT s.id, $1, s.email, true, s.data, now(), now() FROM staged AS s
       ON CONFLICT (project_id, email) DO UPDATE SET data = c.data || EXCLUDED.data, updated_at = EXCLUDED.updated_at
        WHERE (c.data || EXCLUDED.data) <> c.data`,
      [projectId],
    );
    await client.query('COMMIT');
    const t3 = performance.now();
    return { parseMs: t1 - t0, loadMs: t2 - t1, mergeMs: t3 - t2, totalMs: t3 - t0 };
  } finally {
    await client.end();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
