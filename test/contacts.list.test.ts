import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Api } from './helpers/http.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

type Contact = { id: string; email: string; subscribed: boolean; createdAt: string };

async function createMany(api: Api, emails: string[], extra: Record<string, unknown> = {}): Promise<Contact[]> {
  const out: Contact[] = [];
  // Sequential in small batches: createdAt then mostly follows the list order, with some ties.
  for (let i = 0; i < emails.length; i += 5) {
    const batch = await Promise.all(emails.slice(i, i + 5).map((email) => api.post('/contacts', { email, ...extra })));
    for (const r of batch) {
      assert.equal(r.status, 201, r.text);
      out.push(r.body);
    }
  }
  return out;
}

/** Every contact of the project in the requested order, as PostgreSQL orders it (collation included). */
async function expectedOrder(projectId: string, sort: 'createdAt' | 'email', dir: 'asc' | 'desc'): Promise<string[]> {
  const order = sort === 'email' ? `email ${dir}` : `created_at ${dir}, id ${dir}`;
  const rows = await server.sql<{ id: string }>(`SELECT id FROM contacts WHERE project_id = $1 ORDER BY ${order}`, [projectId]);
  return rows.map((r) => r.id);
}

const letters = 'abcdefghijklmnopqrstuvwxyz';
const emailFor = (i: number) => `${letters[i % 26]}${String(i).padStart(3, '0')}@walk.example.com`;

for (const sort of ['createdAt', 'email'] as const) {
  for (const dir of ['asc', 'desc'] as const) {
    test(`a 45-contact walk (sort=${sort}, dir=${dir}, limit 10) sees every contact once while contacts are inserted`, async () => {
      const b = await bootstrap(server.api);
      // Shuffled emails, so creation order and email order differ.
      const original = await createMany(
        b.sk,
        Array.from({ length: 45 }, (_, i) => emailFor((i * 17) % 45)),
      );
      const seen: Contact[] = [];
      const pages: { total: number; hasMore: boolean; cursor?: string; size: number }[] = [];
      let cursor: string | undefined;
      let inserted = 0;
      do {
        const qs = `sort=${sort}&dir=${dir}&limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const res = await b.sk.get(`/contacts?${qs}`);
        assert.equal(res.status, 200, res.text);
        pages.push({ total: res.body.total, hasMore: res.body.hasMore, cursor: res.body.cursor, size: res.body.data.length });
        seen.push(...res.body.data);
        cursor = res.body.cursor;
        // New contacts during the walk: emails that sort before, between and after the walked ones.
        await createMany(b.sk, [`0new${inserted}@walk.example.com`, `m${inserted}x@walk.example.com`, `zz${inserted}@walk.example.com`]);
        inserted += 1;
      } while (cursor);

      const ids = seen.map((c) => c.id);
      assert.equal(new Set(ids).size, ids.length, 'no contact is served twice');
      for (const c of original) assert.equal(ids.filter((id) => id === c.id).length, 1, `${c.email} seen exactly once`);
      const positions = new Map((await expectedOrder(b.project.id, sort, dir)).map((id, i) => [id, i]));
      for (let i = 1; i < seen.length; i++) {
        assert.ok(positions.get(seen[i - 1].id)! < positions.get(seen[i].id)!, `strictly ordered at ${i}`);
      }
      assert.equal(pages[0].total, 45, 'total on the first page');
      assert.ok(
        pages.slice(1).every((p) => p.total === 0),
        'total is 0 on later pages',
      );
      const last = pages.at(-1)!;
      assert.equal(last.hasMore, false);
      assert.equal(last.cursor, undefined);
      assert.ok(pages.slice(0, -1).every((p) => p.hasMore && p.size === 10 && typeof p.cursor === 'string'));
    });
  }
}

describe('list filters and defaults', () => {
  let api: Api;
  before(async () => {
    const b = await bootstrap(server.api);
    api = b.sk;
    await createMany(api, ['Alice@Acme.io', 'bob@acme.io', 'carol@other.org', 'x_y@acme.io', 'xay@other.org'], {});
    await createMany(api, ['eve@acme.io', 'frank@other.org'], { subscribed: false });
  });

  test('default: newest first, limit 20, total on the first page', async () => {
    const res = await api.get('/contacts');
    assert.equal(res.status, 200);
    assert.equal(res.body.data.length, 7);
    assert.equal(res.body.total, 7);
    assert.equal(res.body.hasMore, false);
    assert.equal(res.body.cursor, undefined);
    const created = res.body.data.map((c: Contact) => c.createdAt);
    assert.deepEqual(created, [...created].sort().reverse());
    assert.equal(res.body.data[0]._meta, undefined);
  });

  test('search is a case-insensitive substring match on email; LIKE wildcards are literal', async () => {
    const acme = await api.get('/contacts?search=ACME&sort=email&dir=asc');
    assert.deepEqual(
      acme.body.data.map((c: Contact) => c.email),
      ['alice@acme.io', 'bob@acme.io', 'eve@acme.io', 'x_y@acme.io'],
    );
    assert.equal(acme.body.total, 4);
    const underscore = await api.get('/contacts?search=x_y');
    assert.deepEqual(
      underscore.body.data.map((c: Contact) => c.email),
      ['x_y@acme.io'],
    );
    const percent = await api.get(`/contacts?search=${encodeURIComponent('%')}`);
    assert.deepEqual(percent.body.data, []);
    assert.equal(percent.body.total, 0);
  });

  test('subscribed filters by state; total counts the filtered set', async () => {
    const off = await api.get('/contacts?subscribed=false&sort=email&dir=asc');
    assert.deepEqual(
      off.body.data.map((c: Contact) => c.email),
      ['eve@acme.io', 'frank@other.org'],
    );
    assert.equal(off.body.total, 2);
    const on = await api.get('/contacts?subscribed=true&search=other&limit=1&sort=email&dir=asc');
    assert.deepEqual(
      on.body.data.map((c: Contact) => c.email),
      ['carol@other.org'],
    );
    assert.equal(on.body.total, 2);
    assert.equal(on.body.hasMore, true);
    const next = await api.get(`/contacts?subscribed=true&search=other&limit=1&sort=email&dir=asc&cursor=${on.body.cursor}`);
    assert.deepEqual(
      next.body.data.map((c: Contact) => c.email),
      ['xay@other.org'],
    );
    assert.equal(next.body.total, 0);
    assert.equal(next.body.hasMore, false);
    assert.equal(next.body.cursor, undefined);
  });

  test('sort=email desc and unrecognised sort/dir fall back to createdAt desc', async () => {
    const desc = await api.get('/contacts?sort=email&dir=desc&search=other');
    assert.deepEqual(
      desc.body.data.map((c: Contact) => c.email),
      ['xay@other.org', 'frank@other.org', 'carol@other.org'],
    );
    const fallback = await api.get('/contacts?sort=drop%20table&dir=sideways');
    assert.equal(fallback.status, 200);
    const byDefault = await api.get('/contacts');
    assert.deepEqual(fallback.body.data, byDefault.body.data);
  });

  test('limit above 100 is clamped to 100', async () => {
    const b = await bootstrap(server.api);
    await server.sql(
      `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
       SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'bulk' || g || '@example.com', true,
              now() - g * interval '1 second', now()
         FROM generate_series(1, 105) AS g`,
      [b.project.id],
    );
    const res = await b.sk.get('/contacts?limit=1000');
    assert.equal(res.status, 200);
    assert.equal(res.body.data.length, 100);
    assert.equal(res.body.total, 105);
    assert.equal(res.body.hasMore, true);
    const rest = await b.sk.get(`/contacts?limit=1000&cursor=${res.body.cursor}`);
    assert.equal(rest.body.data.length, 5);
    assert.equal(rest.body.data.at(-1).email, 'bulk105@example.com');
  });
});
