import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { NUMBERED_PAGE_BUDGET, PAGE_DATA_BUDGET } from '../src/db/page-budget.ts';
import { segmentSchema } from '../src/modules/segments/schemas.ts';
import { stallDuring } from './helpers/event-loop.ts';
import { recordStatements } from './helpers/statements.ts';
import { buildWorkflow, waitFor } from './helpers/workflows.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A page of a cursor list carries about PAGE_DATA_BUDGET (4 MB) of `data` at most and ends early
 * with `hasMore`; a page-numbered list (segment members, templates, campaigns) refuses a page past
 * NUMBERED_PAGE_BUDGET (16 MB). 100 contacts of 1 MB had been one 75 MB answer (450 ms of the event
 * loop, +332 MB; ten at once 1.5 GB).
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

  test('GET /segments/:id/contacts refuses a page past its budget, naming a pageSize that fits', async () => {
    // 18 members of about 960 KB: 17.7 MB, over the 16 MB of a numbered page.
    const emails = Array.from({ length: 18 }, (_, i) => `member${i}@example.com`);
    for (const [i, email] of emails.entries()) {
      for (let k = 0; k < 4; k++) {
        const res = await b.sk.post('/contacts', { email, data: { [`m${k}`]: filler(i * 4 + k) } });
        assert.ok(res.status < 300, res.text.slice(0, 300));
      }
    }
    const seg = await b.sk.post('/segments', { name: 'members', type: 'STATIC' });
    assert.equal(seg.status, 201, seg.text);
    assert.equal((await b.sk.post(`/segments/${seg.body.id}/members`, { emails })).status, 200);
    const size = dataBytes(Object.fromEntries([0, 1, 2, 3].map((k) => [`m${k}`, filler(k)])));
    const fit = Math.floor(NUMBERED_PAGE_BUDGET / size);
    assert.equal(fit, 17);

    const big = await b.sk.get(`/segments/${seg.body.id}/contacts?pageSize=100`);
    assert.equal(big.status, 422);
    assert.equal(big.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(big.body.error.errors, [
      {
        field: 'pageSize',
        code: 'too_big',
        message: `These 18 contacts hold ${((18 * size) / 1024 / 1024).toFixed(1)} MB, more than the 16.0 MB a page carries: ask for pageSize=17 or less`,
      },
    ]);
    assert.deepEqual(big.body.error.details, { maxBytes: NUMBERED_PAGE_BUDGET, pageSize: 17 });
    const ok = await b.sk.get(`/segments/${seg.body.id}/contacts?pageSize=17`);
    assert.equal(ok.status, 200, ok.text.slice(0, 300));
    assert.equal(ok.body.data.length, 17);
    assert.equal(ok.body.total, 18);
    assert.equal((ok.body.data[0].data.m3 as string).length, 240 * KB);
    const rest = await b.sk.get(`/segments/${seg.body.id}/contacts?pageSize=17&page=2`);
    assert.deepEqual(
      rest.body.data.map((c: { email: string }) => c.email),
      ['member0@example.com'],
    );
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

describe('templates and campaigns of large bodies', () => {
  const BODY = 1_000_000;
  const body = (i: number) => `<p>${i}</p>`.padEnd(BODY, 'x');
  for (const [path, make] of [
    ['/templates', (i: number) => ({ name: `t${i}`, subject: 's', body: body(i), from: 'a@sandbox.herald.test' })],
    ['/campaigns', (i: number) => ({ name: `c${i}`, subject: 's', body: body(i), from: 'a@sandbox.herald.test' })],
  ] as const) {
    test(`GET ${path}: a page over 16 MB is refused, naming the pageSize that fits`, async () => {
      for (let i = 0; i < 17; i++) {
        const made = await b.sk.post(path, make(i));
        assert.ok(made.status < 300, made.text.slice(0, 300));
      }
      const big = await b.sk.get(`${path}?pageSize=100`);
      assert.equal(big.status, 422, big.text.slice(0, 300));
      assert.deepEqual(big.body.error.details, { maxBytes: NUMBERED_PAGE_BUDGET, pageSize: 16 });
      assert.equal(big.body.error.errors[0].field, 'pageSize');
      const ok = await b.sk.get(`${path}?pageSize=16`);
      assert.equal(ok.status, 200, ok.text.slice(0, 300));
      assert.equal(ok.body.data.length, 16);
      assert.equal(ok.body.data[0].body.length, BODY);
      assert.equal(ok.body.total, 17);
      assert.equal(ok.body.totalPages, 2);
    });
  }
});

describe('GET /segments, unpaginated, of large conditions', () => {
  test('every segment, newest first, conditions as saved, read in batches without holding the event loop, as a heavy read', async () => {
    const server2 = await startTestServer();
    try {
      const owner = await bootstrap(server2.api);
      // 12 conditions of about 600 KB: 7.2 MB in one answer (the caps allow 8 MB).
      const condition = (i: number) => ({
        logic: 'OR',
        groups: Array.from({ length: 6 }, (_, g) => ({
          filters: Array.from({ length: 60 }, (_, f) => ({
            field: `data.f${f}`,
            operator: 'in',
            value: Array.from({ length: 100 }, (_, v) => `${i}-${g}-${f}-${v}`.padEnd(14, 'x')),
          })),
        })),
      });
      const made: { id: string; condition: unknown }[] = [];
      for (let i = 0; i < 12; i++) {
        const res = await owner.sk.post('/segments', { name: `s${i}`, condition: condition(i) });
        assert.equal(res.status, 201, res.text.slice(0, 300));
        made.push({ id: res.body.id, condition: condition(i) });
      }
      const list = await owner.sk.post('/segments', { name: 'list', type: 'STATIC' });
      assert.equal(list.status, 201, list.text);

      // Past 1 MB of conditions the list takes one of the project's heavy-read slots: with both taken, a 429.
      const held = [await server2.ctx.heavyReads.slots.take(owner.project.id), await server2.ctx.heavyReads.slots.take(owner.project.id)];
      try {
        assert.equal((await owner.sk.get('/segments')).status, 429);
      } finally {
        for (const release of held) release();
      }

      // Read in batches of about PAGE_DATA_BUDGET (a statement each); the event loop's longest stall
      // includes GC and the scheduler, so its bound only catches a gross regression.
      const statements = recordStatements();
      const batchesRead = () => statements.texts.filter((t) => t.includes('FROM segments CROSS JOIN LATERAL')).length;
      const readBefore = batchesRead();
      const { result: res, stallMs } = await stallDuring(async () => {
        const answer = await fetch(`${server2.url}/segments`, { headers: { authorization: `Bearer ${owner.project.secretKey}` } });
        return { status: answer.status, headers: answer.headers, text: await answer.text() };
      });
      const batches = batchesRead() - readBefore;
      assert.ok(batches >= 2, `${batches} batches`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.ok(res.text.length > 7_000_000, `${res.text.length} characters`);
      const body = JSON.parse(res.text);
      z.array(segmentSchema).parse(body);
      assert.deepEqual(
        body.map((s: { id: string }) => s.id),
        [list.body.id, ...made.map((s) => s.id).reverse()],
      );
      assert.equal(body[0].condition, null);
      for (const [i, s] of [...made].reverse().entries()) assert.deepEqual(body[i + 1].condition, s.condition);
      assert.ok(stallMs < 1000, `event loop held ${Math.round(stallMs)} ms`);
    } finally {
      await server2.stop();
    }
  });
});

describe('workflow executions of large contexts', () => {
  test('GET /workflows/:id/executions ends a page at the budget; the cursor serves every execution once', async () => {
    const wf = await buildWorkflow(b.sk, {
      eventName: 'big_signup',
      steps: [{ key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'days' } }],
      edges: [['trigger', 'wait']],
    });
    const EXECUTIONS = 20;
    for (let i = 0; i < EXECUTIONS; i++) {
      const res = await b.sk.post('/events/track', { email: `runner${i}@example.com`, event: 'big_signup', data: { blob: filler(i) } });
      assert.equal(res.status, 200, res.text.slice(0, 300));
    }
    const started = await waitFor('the executions', async () => {
      const res = await b.sk.get(`/workflows/${wf.id}/executions?limit=1`);
      return res.body.total === EXECUTIONS;
    });
    assert.ok(started);
    const pages = await walk(`/workflows/${wf.id}/executions`);
    assert.ok(pages[0].data.length < EXECUTIONS && pages[0].hasMore, `first page: ${pages[0].data.length}`);
    const contexts = pages.flatMap((p) => p.data.map((e) => (e as unknown as { context: { blob: string } }).context));
    assertWithinBudget(pages.map((p) => ({ ...p, data: p.data.map((e) => ({ ...e, data: (e as unknown as { context: Record<string, unknown> }).context })) })));
    assert.equal(contexts.length, EXECUTIONS);
    assert.deepEqual(
      contexts.map((c) => Number(c.blob.split(':')[0])).sort((x, y) => x - y),
      Array.from({ length: EXECUTIONS }, (_, i) => i),
    );
  });
});
