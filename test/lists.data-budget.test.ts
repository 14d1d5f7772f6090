import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PAGE_DATA_BUDGET } from '../src/db/page-budget.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A page of a list carries about PAGE_DATA_BUDGET (4 MB) of `data` at most: cursor lists end the
 * page early with `hasMore`, the page-numbered segment member list refuses a page past it. 100
 * contacts of 1 MB had been one 75 MB answer (450 ms of the event loop, +332 MB; ten at once 1.5 GB).
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

const KB = 1024;
/** 240 KB of text that differs by `seed` (one request's data is at most 256 KB). */
const filler = (seed: number) => `${seed}:`.padEnd(240 * KB, String.fromCharCode(97 + (seed % 26)));
const dataBytes = (data: unknown) => Buffer.byteLength(JSON.stringify(data).replace(/([,:])/g, '$1 '));

type Page = { data: { id: string; email?: string; name?: string; data: Record<string, unknown> }[]; hasMore: boolean; cursor?: string };

/** Every page of a cursor list, following `cursor` until `hasMore` is false. */
async function walk(path: string): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | undefined;
  do {
    const res = await b.sk.get<Page>(`${path}${path.includes('?') ? '&' : '?'}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, res.text.slice(0, 300));
    pages.push(res.body);
    cursor = res.body.hasMore ? res.body.cursor : undefined;
    assert.ok(!res.body.hasMore || cursor, 'hasMore comes with a cursor');
  } while (cursor);
  return pages;
}

/** Each page ends at the first row that starts past the budget: the data before its last row is under it. */
function assertWithinBudget(pages: Page[]): void {
  for (const page of pages) {
    const sizes = page.data.map((item) => dataBytes(item.data));
    const beforeLast = sizes.slice(0, -1).reduce((s, n) => s + n, 0);
    assert.ok(beforeLast < PAGE_DATA_BUDGET, `a page holds ${beforeLast} bytes before its last row`);
  }
}

const CONTACTS = 12;
const contactIds: string[] = [];
let bigSegment = '';

describe('contacts of large data', () => {
  before(async () => {
    for (let i = 0; i < CONTACTS; i++) {
      let id = '';
      for (let k = 0; k < 3; k++) {
        const res = await b.sk.post('/contacts', { email: `big${String(i).padStart(2, '0')}@example.com`, data: { [`k${k}`]: filler(i * 3 + k) } });
        assert.ok(res.status < 300, res.text.slice(0, 300));
        id = res.body.id;
      }
      contactIds.push(id);
    }
    await b.sk.post('/contacts', { email: 'small@example.com', data: { plan: 'pro' } });
  });

  test('GET /contacts ends a page at the budget and the cursor serves every contact once, in order', async () => {
    const pages = await walk('/contacts');
    assert.equal(pages.length, 2);
    assert.equal(pages[0].data.length, 7, 'the small contact and six of 720 KB: the sixth starts at 3.6 MB, under 4 MB');
    assert.equal(pages[0].hasMore, true);
    assertWithinBudget(pages);
    const served = pages.flatMap((p) => p.data.map((c) => c.email));
    const expected = ['small@example.com', ...Array.from({ length: CONTACTS }, (_, i) => `big${String(CONTACTS - 1 - i).padStart(2, '0')}@example.com`)];
    assert.deepEqual(served, expected);
    const first = pages[0].data.find((c) => c.email === 'big11@example.com');
    assert.equal((first?.data.k2 as string).length, 240 * KB, 'data is served whole');
  });

  test('sorted by email, ascending: the same budget and every contact once', async () => {
    const pages = await walk('/contacts?sort=email&dir=asc');
    assertWithinBudget(pages);
    const served = pages.flatMap((p) => p.data.map((c) => c.email));
    assert.deepEqual(served, [...Array.from({ length: CONTACTS }, (_, i) => `big${String(i).padStart(2, '0')}@example.com`), 'small@example.com']);
  });

  test('GET /segments/:id/contacts refuses a page past the budget, naming a pageSize that fits', async () => {
    const seg = await b.sk.post('/segments', { name: 'big', condition: { groups: [{ filters: [{ field: 'email', operator: 'contains', value: 'big' }] }] } });
    assert.equal(seg.status, 201, seg.text);
    bigSegment = seg.body.id;
    const big = await b.sk.get(`/segments/${bigSegment}/contacts?pageSize=100`);
    assert.equal(big.status, 422);
    assert.equal(big.body.error.code, 'VALIDATION_ERROR');
    assert.equal(big.body.error.errors.length, 1);
    const [error] = big.body.error.errors;
    assert.equal(error.field, 'pageSize');
    assert.equal(error.code, 'too_big');
    const fit = Number(/pageSize=(\d+) or less/.exec(error.message)?.[1]);
    assert.match(error.message, /^These 12 contacts hold [\d.]+ MB of data, more than the 4\.0 MB a page carries: ask for pageSize=\d+ or less$/);
    const ok = await b.sk.get(`/segments/${bigSegment}/contacts?pageSize=${fit}`);
    assert.equal(ok.status, 200, ok.text.slice(0, 300));
    assert.equal(fit, 5);
    assert.deepEqual(big.body.error.details, { maxBytes: PAGE_DATA_BUDGET, pageSize: 5 });
    assert.equal(ok.body.data.length, 5);
    assert.equal(ok.body.total, 12);
  });

  test('data_bytes is kept by every write of data, and rows without it are measured instead', async () => {
    const patched = await b.sk.patch(`/contacts/${contactIds[0]}`, { data: { k0: null, note: 'x' } });
    assert.equal(patched.status, 200, patched.text);
    const tracked = await b.pk.post('/v1/track', { email: 'big01@example.com', event: 'visit', data: { visits: 3 } });
    assert.equal(tracked.status, 200, tracked.text);
    const field = await b.sk.delete('/contacts/fields/k1');
    assert.ok(field.status < 300, field.text);
    const wrong = await server.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND data_bytes IS DISTINCT FROM octet_length(data::text)`,
      [b.project.id],
    );
    assert.equal(wrong[0].n, 0);
    const walked = (await walk('/contacts')).flatMap((p) => p.data.map((c) => c.id));
    await server.sql(`ALTER TABLE contacts DISABLE TRIGGER contacts_data_bytes`);
    try {
      await server.sql(`UPDATE contacts SET data_bytes = NULL WHERE project_id = $1`, [b.project.id]);
      const pages = await walk('/contacts');
      assertWithinBudget(pages);
      assert.deepEqual(
        pages.flatMap((p) => p.data.map((c) => c.id)),
        walked,
      );
    } finally {
      await server.sql(`ALTER TABLE contacts ENABLE TRIGGER contacts_data_bytes`);
    }
  });
});

describe('events of large data', () => {
  const EVENTS = 20;
  let contactId = '';
  before(async () => {
    for (let i = 0; i < EVENTS; i++) {
      const res = await b.sk.post('/events/track', { email: 'events@example.com', event: 'big', data: { blob: filler(i) } });
      assert.equal(res.status, 200, res.text.slice(0, 300));
      contactId = res.body.data?.contact ?? res.body.contact ?? contactId;
    }
    if (!contactId) {
      const found = await b.sk.get('/contacts?search=events@example.com');
      contactId = found.body.data[0].id;
    }
  });

  for (const path of ['/events?name=big', () => `/events/contact/${contactId}`, '/activity?types=event']) {
    test(`GET ${typeof path === 'string' ? path : '/events/contact/:id'}: pages end at the budget, each event once`, async () => {
      const pages = await walk(typeof path === 'string' ? path : path());
      assert.ok(pages[0].data.length < EVENTS && pages[0].hasMore, `first page: ${pages[0].data.length} events`);
      assertWithinBudget(pages);
      const big = pages.flatMap((p) => p.data).filter((e) => typeof e.data.blob === 'string');
      assert.equal(big.length, EVENTS);
      assert.deepEqual(
        big.map((e) => Number((e.data.blob as string).split(':')[0])),
        Array.from({ length: EVENTS }, (_, i) => EVENTS - 1 - i),
      );
    });
  }
});
