import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import { compileCondition, parseCondition } from '../src/conditions/index.ts';
import { CONTACT_SEARCH_INDEX, SUPPRESSION_SEARCH_INDEX, ensureSearchIndexes } from '../src/db/search-index.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, createTestDatabase, startTestServer } from './helpers/server.ts';

/** `GET /contacts?search=` has a trigram index on the email (src/db/search-index.ts). */

// Enough that reading them all costs the planner more than the index (at 20,000 it reads them: about 3 ms).
const CONTACTS = 100_000;

let server: TestServer;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'user' || g || '.' || substr(md5(g::text), 1, 6) || '@example.com', true, '{}'
       FROM generate_series(1, $2::int) AS g`,
    [b.project.id, CONTACTS],
  );
  // ANALYZE reads every row, so the plans below do not depend on its sample: from the default
  // 30,000 rows, one analysis in about thirty estimated the endsWith pattern at 1 % of the table,
  // and the planner rightly read the table instead (a CI failure after migration 0029, whose
  // autovacuum analyzes contacts again after 20,000 changed rows).
  await server.sql('ALTER TABLE contacts ALTER COLUMN email SET STATISTICS 10000');
  await server.sql('ANALYZE contacts');
});
after(() => server?.stop());

const planOf = async (query: SQL) =>
  (await server.ctx.database.db.execute<{ 'QUERY PLAN': string }>(sql`EXPLAIN ${query}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
const md5Prefix = (g: number) => createHash('md5').update(String(g)).digest('hex').slice(0, 6);

const indexState = async (s: TestServer, name: string = CONTACT_SEARCH_INDEX) =>
  (await s.sql<{ valid: boolean }>(`SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, [name]))[0];

describe('the contact search index', () => {
  test('a search for part of one address is read through the index, and answers as before', async () => {
    assert.deepEqual(await indexState(server), { valid: true });
    const target = (await server.sql<{ email: string }>(`SELECT email FROM contacts WHERE id = 'cnt_' || lpad(to_hex(12345), 32, '0')`))[0].email;
    const part = target.slice(0, target.indexOf('@')).slice(-8).toUpperCase(); // "345.xxxxxx", case-insensitive
    const res = await b.sk.get(`/contacts?search=${encodeURIComponent(part)}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.data.map((c: { email: string }) => c.email),
      [target],
    );
    assert.equal(res.body.total, 1);

    // The list's count, as list.ts writes it: a bitmap of the index's matches, not a scan of 100,000 contacts.
    const plan = await planOf(
      sql`SELECT count(*) FROM contacts AS c WHERE c.project_id = ${b.project.id} AND lower(c.email) LIKE ${`%${part.toLowerCase()}%`}`,
    );
    assert.match(plan, new RegExp(`Bitmap Index Scan on ${CONTACT_SEARCH_INDEX}`), plan);
  });

  test('a segment condition on the email is read through the index too, and counts as before', async () => {
    const oneOf = (g: number) => `user${g}.${md5Prefix(g)}@example.com`;
    const cases: [Record<string, unknown>, number][] = [
      [{ field: 'email', operator: 'contains', value: 'R12345.' }, 1],
      [{ field: 'email', operator: 'startsWith', value: 'USER9999' }, 11], // user9999 and user99990–user99999
      [{ field: 'email', operator: 'endsWith', value: `${md5Prefix(4242)}@example.com` }, 1],
      [{ field: 'email', operator: 'equals', value: oneOf(777).toUpperCase() }, 1],
    ];
    for (const [filter, expected] of cases) {
      const condition = { logic: 'AND', groups: [{ filters: [filter] }] };
      const counted = await b.sk.post('/segments/count', { condition });
      assert.deepEqual([counted.status, counted.body], [200, { count: expected }], `${JSON.stringify(filter)}: ${counted.text}`);
      const compiled = compileCondition(server.ctx.database.db, b.project.id, parseCondition(condition), { types: new Map(), now: new Date() });
      const plan = await planOf(sql`SELECT count(*) FROM contacts AS c WHERE c.project_id = ${b.project.id} AND ${await compiled}`);
      assert.match(plan, new RegExp(`Bitmap Index Scan on ${CONTACT_SEARCH_INDEX}`), `${JSON.stringify(filter)}\n${plan}`);
    }
  });

  test('an index an interrupted build left invalid is built again at the next start (the suppressions one too)', async () => {
    const databaseUrl = await createTestDatabase();
    const first = await startTestServer({}, { databaseUrl });
    const both = [CONTACT_SEARCH_INDEX, SUPPRESSION_SEARCH_INDEX];
    try {
      // What CREATE INDEX CONCURRENTLY leaves when it fails part way.
      await first.sql(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = ANY($1::regclass[])`, [both]);
      for (const name of both) assert.deepEqual(await indexState(first, name), { valid: false }, name);
    } finally {
      await first.stop();
    }
    const second = await startTestServer({}, { databaseUrl });
    try {
      for (const name of both) assert.deepEqual(await indexState(second, name), { valid: true }, name);
    } finally {
      await second.stop();
    }
  });

  test('where pg_trgm cannot be created, the outcome says why and nothing is thrown', async () => {
    // A role without CREATE on the database may not create even a trusted extension.
    const databaseUrl = await createTestDatabase();
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    const role = `nosearch_${Date.now().toString(36)}`;
    try {
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'`);
      await admin.query(`CREATE TABLE contacts (email text)`);
      const url = new URL(databaseUrl);
      url.username = role;
      url.password = 'pw';
      const limited = new pg.Client({ connectionString: url.toString() });
      await limited.connect();
      try {
        const outcome = await ensureSearchIndexes(limited);
        assert.equal(outcome.state, 'unavailable');
        assert.match(
          outcome.state === 'unavailable' ? outcome.reason : '',
          /^the pg_trgm extension could not be created \(permission denied to create extension "pg_trgm"\): create it in this database \(it ships with PostgreSQL's contrib modules\), then restart$/,
        );
      } finally {
        await limited.end();
      }
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
      await admin.end();
    }
  });
});
