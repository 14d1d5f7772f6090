import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { withTransaction } from '../src/db/client.ts';
import { customDataSchema, storedNumberLength } from '../src/modules/contacts/custom-data.ts';
import { MAX_CONTACT_DATA_BYTES } from '../src/modules/contacts/data-sql.ts';
import { updateContactsData } from '../src/modules/contacts/service.ts';
import { upsertContacts } from '../src/modules/contacts/upsert-many.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A contact's stored `data` stays within MAX_CONTACT_DATA_BYTES whatever the writes that build it
 * (the per-request cap bounds one write, not the merge), and what the per-request cap counts is
 * the JSON a reader gets: U+0001 is 6 bytes there, not 1.
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' });
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

// 40,000 control characters: 40 KB as UTF-8, 240 KB as JSON (and as PostgreSQL prints it).
const CHUNK = '\u0001'.repeat(40_000);

type Stored = { id: string; data: Record<string, unknown>; text_bytes: number; updated_at: string; events: number };

async function stored(email: string): Promise<Stored | undefined> {
  const rows = await server.sql<Stored>(
    `SELECT c.id, c.data, octet_length(c.data::text) AS text_bytes, c.updated_at::text,
            (SELECT count(*)::int FROM events e WHERE e.contact_id = c.id) AS events
       FROM contacts c WHERE c.project_id = $1 AND c.email = $2`,
    [b.project.id, email],
  );
  return rows[0];
}

function assertRefused(res: Res, field = 'data', code = 'too_big'): void {
  assert.equal(res.status, 422, res.text);
  assert.equal(res.body.error.code, 'VALIDATION_ERROR');
  assert.deepEqual(
    res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
    [[field, code]],
  );
}

const track = (email: string, data: Record<string, unknown>) => b.pk.post('/v1/track', { email, event: 'e', data });

/** A contact holding `keys`, each one CHUNK (one request each: two would pass the per-request cap). */
async function grown(email: string, keys: string[]): Promise<string> {
  let id = '';
  for (const key of keys) {
    const res = await b.sk.post('/contacts', { email, data: { [key]: [CHUNK] } });
    assert.ok(res.status === 200 || res.status === 201, res.text);
    id = res.body.id;
  }
  return id;
}

describe('a contact grown write by write stays within the bound', () => {
  test('public-key tracks: the write that would pass 1 MB is 422 and changes nothing', async () => {
    const email = 'victim@example.com';
    for (let i = 0; i < 4; i++) assert.equal((await track(email, { [`k${i}`]: [CHUNK] })).status, 200);
    const before = (await stored(email))!;
    assert.deepEqual(Object.keys(before.data).sort(), ['k0', 'k1', 'k2', 'k3']);
    assert.ok(before.text_bytes > 960_000 && before.text_bytes <= MAX_CONTACT_DATA_BYTES, String(before.text_bytes));
    assert.equal(before.events, 4);

    for (let i = 4; i < 8; i++) {
      const res = await track(email, { [`k${i}`]: [CHUNK] });
      assertRefused(res);
      assert.match(res.body.error.errors[0].message, /at most 1 MB/);
    }
    const after = (await stored(email))!;
    assert.deepEqual(after, before, 'no data, no updated_at, no event from the refused tracks');
    const fields = await server.sql(`SELECT key FROM contact_fields WHERE project_id = $1 AND key LIKE 'k%'`, [b.project.id]);
    assert.deepEqual(fields, [], 'arrays type no field');

    // What still fits is still written: a small value, and a change that shrinks the data.
    assert.equal((await track(email, { plan: 'pro' })).status, 200);
    assert.equal((await track(email, { k0: null, k4: [CHUNK] })).status, 200);
    const last = (await stored(email))!;
    assert.deepEqual(Object.keys(last.data).sort(), ['k1', 'k2', 'k3', 'k4', 'plan']);
    assert.ok(last.text_bytes <= MAX_CONTACT_DATA_BYTES);
  });

  test('POST /contacts and PATCH /contacts/:id refuse the same way', async () => {
    const id = await grown('patched@example.com', ['a', 'b', 'c', 'd']);
    const before = (await stored('patched@example.com'))!;
    assertRefused(await b.sk.post('/contacts', { email: 'patched@example.com', data: { e: [CHUNK] } }));
    assertRefused(await b.sk.patch(`/contacts/${id}`, { data: { e: [CHUNK], tier: 'gold' }, subscribed: false }));
    const after = (await stored('patched@example.com'))!;
    assert.deepEqual(after, before);
    const contact = await b.sk.get(`/contacts/${id}`);
    assert.equal(contact.body.subscribed, true, 'the refused PATCH changed no subscription either');
    const tier = await server.sql(`SELECT key FROM contact_fields WHERE project_id = $1 AND key = 'tier'`, [b.project.id]);
    assert.deepEqual(tier, [], 'the refused PATCH recorded no field type');
    // A PATCH that replaces a value with one of the same size still passes.
    const replaced = await b.sk.patch(`/contacts/${id}`, { data: { a: [CHUNK.replace('\u0001', '\u0002')] } });
    assert.equal(replaced.status, 200, replaced.text);
  });

  test('concurrent tracks cannot pass the bound together', async () => {
    const email = 'race@example.com';
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => track(email, { [`r${i}`]: [CHUNK] })));
    const statuses = results.map((r) => r.status).sort();
    const written = statuses.filter((s) => s === 200).length;
    assert.equal(written, 4, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 422).length, 4);
    const row = (await stored(email))!;
    assert.equal(Object.keys(row.data).length, 4);
    assert.equal(row.events, 4);
    assert.ok(row.text_bytes <= MAX_CONTACT_DATA_BYTES);
  });

  test('the grouped upsert (multi-recipient sends) writes nothing when one contact would pass it', async () => {
    await grown('g1@example.com', ['a', 'b', 'c', 'd']);
    const before = await Promise.all(['g1@example.com', 'g0@example.com'].map(stored));
    const db = server.ctx.database;
    const now = new Date();
    await assert.rejects(
      withTransaction(db, ({ tx }) =>
        upsertContacts(
          tx,
          b.project.id,
          [
            { email: 'g0@example.com', data: { plan: 'pro' }, now },
            { email: 'g1@example.com', data: { e: [CHUNK] }, now },
          ],
          { defaultSubscribed: false },
        ),
      ),
      (err: { statusCode?: number; errors?: { field: string; code: string }[] }) =>
        err.statusCode === 422 && err.errors?.[0]?.field === 'data' && err.errors[0].code === 'too_big',
    );
    assert.deepEqual(await Promise.all(['g1@example.com', 'g0@example.com'].map(stored)), before);
    // Without the oversized input the same group goes through.
    const ok = await upsertContacts(db.db, b.project.id, [{ email: 'g0@example.com', data: { plan: 'pro' }, now }], { defaultSubscribed: false });
    assert.equal(ok[0].contact.data.plan, 'pro');
  });

  test('a workflow batch update (updateContactsData) refuses whole', async () => {
    const big = await grown('wf-big@example.com', ['a', 'b', 'c', 'd']);
    const small = (await b.sk.post('/contacts', { email: 'wf-small@example.com' })).body.id;
    const before = await Promise.all(['wf-big@example.com', 'wf-small@example.com'].map(stored));
    await assert.rejects(
      updateContactsData(server.ctx.database.db, b.project.id, [big, small], { e: [CHUNK] }, { now: new Date() }),
      (err: { statusCode?: number }) => err.statusCode === 422,
    );
    assert.deepEqual(await Promise.all(['wf-big@example.com', 'wf-small@example.com'].map(stored)), before);
  });

  test('a contact stored over the bound (before it existed) can shrink, not grow', async () => {
    const email = 'legacy@example.com';
    assert.equal((await track(email, { keep: 1 })).status, 200);
    const huge = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`h${i}`, [CHUNK]]));
    await server.sql(`UPDATE contacts SET data = data || $3::jsonb WHERE project_id = $1 AND email = $2`, [b.project.id, email, JSON.stringify(huge)]);
    assert.equal((await track(email, { keep: 1 })).status, 200, 'nothing new: nothing to refuse');
    assertRefused(await track(email, { extra: 1 }));
    // Still over the bound, but smaller than before: allowed.
    assert.equal((await track(email, { h0: null, extra: 1 })).status, 200);
    const row = (await stored(email))!;
    assert.deepEqual(Object.keys(row.data).sort(), ['extra', 'h1', 'h2', 'h3', 'h4', 'h5', 'keep']);
    assert.ok(row.text_bytes > MAX_CONTACT_DATA_BYTES);
  });
});

describe('what the per-request cap counts', () => {
  test('strings by their JSON text: 50,000 U+0001 are 300 KB, over the 256 KB cap', async () => {
    assertRefused(await b.sk.post('/contacts', { email: 'ctrl@example.com', data: { b: '\u0001'.repeat(50_000) } }));
    assertRefused(await track('ctrl@example.com', { note: { value: '"'.repeat(140_000), persistent: false } }));
    assert.equal(await stored('ctrl@example.com'), undefined);
    const ok = await b.sk.post('/contacts', { email: 'ctrl@example.com', data: { b: '\u0001'.repeat(40_000), s: 'é'.repeat(10_000) } });
    assert.equal(ok.status, 201, ok.text);
  });

  test('numbers as PostgreSQL prints them: 1e-300 is 302 characters', async () => {
    assertRefused(await b.sk.post('/contacts', { email: 'tiny@example.com', data: { t: new Array(1000).fill(1e-300) } }));
    assert.equal(await stored('tiny@example.com'), undefined);
    const samples = [0, -0, 1, -1.5, 123.456, 1e21, -1.5e21, 1e300, 1.7976931348623157e308, 1e-7, -1.23e-7, 5e-324, 2 ** 53];
    const rows = await server.sql<{ n: number }>(`SELECT octet_length(x::text) AS n FROM jsonb_array_elements($1::jsonb) AS x`, [JSON.stringify(samples)]);
    assert.deepEqual(
      samples.map(storedNumberLength),
      rows.map((r) => r.n),
    );
  });

  test('printed JSON is at most 40 bytes per byte of jsonb (why the bound prints only larger data)', async () => {
    const worst: unknown[] = [
      { a: new Array(5000).fill(5e-324) },
      { a: new Array(5000).fill(-1.7976931348623157e308) },
      { a: new Array(5000).fill(-1.2345678901234567e-300) },
      { a: '\u0001'.repeat(50_000) },
      { a: new Array(5000).fill('\u0001') },
      { a: new Array(5000).fill([]) },
      Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`\u0001${i}`, 5e-324])),
    ];
    for (const value of worst) {
      const [row] = await server.sql<{ printed: number; stored: number }>(
        `SELECT octet_length($1::jsonb::text) AS printed, pg_column_size($1::jsonb) AS stored`,
        [JSON.stringify(value)],
      );
      assert.ok(row.printed <= 40 * row.stored, `${row.printed} printed from ${row.stored} bytes`);
    }
  });

  test('separators count: 250,000 zeros are 500 KB of JSON', () => {
    const parsed = customDataSchema.safeParse({ z: new Array(250_000).fill(0) });
    assert.equal(parsed.success, false);
    assert.equal(customDataSchema.safeParse({ z: new Array(100_000).fill(0) }).success, true);
  });
});

describe('out-of-range numbers are refused, not stored as null', () => {
  const raw = (api: typeof b.sk, method: string, path: string, body: string) =>
    api.request(method, path, { raw: body, headers: { 'content-type': 'application/json' } });

  test('POST /contacts, PATCH and /v1/track answer 422 naming the value', async () => {
    assertRefused(await raw(b.sk, 'POST', '/contacts', '{"email":"n@example.com","data":{"big":1e400}}'), 'data.big');
    assertRefused(await raw(b.sk, 'POST', '/contacts', '{"email":"n@example.com","data":{"x":{"y":[1,-1e400]}}}'), 'data.x.y.1');
    assertRefused(await raw(b.pk, 'POST', '/v1/track', '{"email":"n@example.com","event":"e","data":{"big":1e400}}'), 'data.big');
    assertRefused(
      await raw(b.sk, 'POST', '/events/track', '{"email":"n@example.com","event":"e","data":{"big":{"value":1e400,"persistent":false}}}'),
      'data.big.value',
    );
    assert.equal(await stored('n@example.com'), undefined);
    const created = await b.sk.post('/contacts', { email: 'n@example.com', data: { big: 1e308 } });
    assert.equal(created.status, 201);
    assertRefused(await raw(b.sk, 'PATCH', `/contacts/${created.body.id}`, '{"data":{"other":1e400}}'), 'data.other');
    const row = (await stored('n@example.com'))!;
    assert.deepEqual(row.data, { big: 1e308 });
  });
});

describe('locale must be a string, wrapped or not', () => {
  test('{ value: 1, persistent: true } is 422; a wrapped string is stored', async () => {
    const res = await b.sk.post('/contacts', { email: 'l@example.com', data: { locale: { value: 1, persistent: true } } });
    assertRefused(res, 'data.locale.value', 'invalid_type');
    assert.equal(res.body.error.errors[0].received, 'number');
    assertRefused(await track('l@example.com', { locale: { value: ['de'], persistent: false } }), 'data.locale.value', 'invalid_type');
    assert.equal(await stored('l@example.com'), undefined);
    assert.equal((await b.sk.post('/contacts', { email: 'l@example.com', data: { locale: { value: 'de', persistent: true } } })).status, 201);
    assert.deepEqual((await stored('l@example.com'))!.data, { locale: 'de' });
    assert.equal((await track('l@example.com', { locale: { value: null, persistent: true } })).status, 200);
    assert.deepEqual((await stored('l@example.com'))!.data, {});
  });
});
