import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { CONTACT_SEARCH_INDEX, ensureContactSearchIndex } from '../src/db/search-index.ts';
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
  await server.sql('ANALYZE contacts');
});
after(() => server?.stop());

const indexState = async (s: TestServer) =>
  (
    await s.sql<{ valid: boolean }>(`SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, [
      CONTACT_SEARCH_INDEX,
    ])
  )[0];

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
    const plan = (
      await server.sql<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT count(*) FROM contacts AS c WHERE c.project_id = $1 AND c.email LIKE $2 ESCAPE '\\'`, [
        b.project.id,
        `%${part.toLowerCase()}%`,
      ])
    )
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    assert.match(plan, new RegExp(`Bitmap Index Scan on ${CONTACT_SEARCH_INDEX}`), plan);
  });

  test('an index an interrupted build left invalid is built again at the next start', async () => {
    const databaseUrl = await createTestDatabase();
    const first = await startTestServer({}, { databaseUrl });
    try {
      // What CREATE INDEX CONCURRENTLY leaves when it fails part way.
      await first.sql(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass`, [CONTACT_SEARCH_INDEX]);
      assert.deepEqual(await indexState(first), { valid: false });
    } finally {
      await first.stop();
    }
    const second = await startTestServer({}, { databaseUrl });
    try {
      assert.deepEqual(await indexState(second), { valid: true });
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
        const outcome = await ensureContactSearchIndex(limited);
        assert.equal(outcome.state, 'unavailable');
        assert.match(outcome.state === 'unavailable' ? outcome.reason : '', /^the pg_trgm extension could not be created: permission denied/);
      } finally {
        await limited.end();
      }
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
      await admin.end();
    }
  });
});
