import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { maintainEventPartitions } from '../src/modules/events/partitions.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Api } from './helpers/http.ts';
import { waitForStatus } from './helpers/mail.ts';
import { waitForJob } from './helpers/bulk.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * Issue 15: the first page of GET /events answers `total` from per-name counters instead of
 * counting the events. It must stay exact: after every kind of write, `total` equals the number
 * of events a client reads by following the cursors.
 */

let fixed: Date | null = null;
const clock = { now: () => fixed ?? new Date() };

/** The events a client reads by following every cursor. */
async function walkedCount(api: Api, path: string): Promise<number> {
  let n = 0;
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const sep = path.includes('?') ? '&' : '?';
    const res = await api.get(`${path}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, res.text);
    if (cursor) assert.equal(res.body.total, 0, 'later pages carry no total');
    n += res.body.data.length;
    if (!res.body.hasMore) return n;
    cursor = res.body.cursor;
  }
  throw new Error(`${path}: more than 100 pages`);
}

async function firstPageTotal(api: Api, path: string): Promise<number> {
  const res = await api.get(path);
  assert.equal(res.status, 200, res.text);
  return res.body.total;
}

/**
 * `total` of GET /events (and with ?name= for each name) against the events walked; returns the
 * totals. Work the server does after answering (email delivery) may add events meanwhile: a
 * reading is kept once the total is the same before and after the walk.
 */
async function assertExactTotals(api: Api, names: string[] = []): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const path of ['/events', ...names.map((n) => `/events?name=${encodeURIComponent(n)}`)]) {
    for (let attempt = 1; ; attempt++) {
      const total = await firstPageTotal(api, path);
      const walked = await walkedCount(api, path);
      if (total !== walked && attempt < 5 && (await firstPageTotal(api, path)) !== total) {
        await sleep(200);
        continue;
      }
      assert.equal(total, walked, `${path}: total ${total}, ${walked} events listed`);
      totals[path === '/events' ? '*' : decodeURIComponent(path.slice('/events?name='.length))] = total;
      break;
    }
  }
  return totals;
}

async function track(b: Bootstrapped, email: string, event: string): Promise<{ contact: string; event: string }> {
  const res = await b.pk.post('/v1/track', { email, event });
  assert.equal(res.status, 200, res.text);
  return res.body.data;
}

describe('GET /events total', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' }, { clock });
  });
  after(() => server?.stop());

  test('tracks one by one and many at once (grouped writes): total is the number of events, for the whole list and each name', async () => {
    const b = await bootstrap(server.api);
    assert.deepEqual(await assertExactTotals(b.sk, ['signup']), { '*': 0, signup: 0 });
    for (let i = 0; i < 3; i++) await track(b, `one-${i}@example.com`, 'signup');
    await Promise.all(Array.from({ length: 40 }, (_, i) => track(b, `many-${i % 10}@example.com`, i % 2 ? 'page' : 'click')));
    const totals = await assertExactTotals(b.sk, ['signup', 'page', 'click', 'contact.subscribed', 'never-tracked']);
    assert.equal(totals.signup, 3);
    assert.equal(totals.page, 20);
    assert.equal(totals.click, 20);
    assert.equal(totals['never-tracked'], 0);
    assert.equal(totals['*'], 43 + totals['contact.subscribed']);

    // Another project's events are not in this one's total.
    const other = await bootstrap(server.api, 'other');
    await track(other, 'one-0@example.com', 'signup');
    assert.equal((await assertExactTotals(b.sk, ['signup'])).signup, 3);
    assert.equal((await assertExactTotals(other.sk, ['signup'])).signup, 1);
  });

  test('the email.* events of a delivery are counted', async () => {
    const b = await bootstrap(server.api);
    for (const to of ['first@example.com', 'second@example.com']) {
      const sent = await b.sk.post('/v1/send', { to, from: 'hello@sandbox.herald.test', subject: 'Hi', body: '<p>Hello</p>' });
      assert.equal(sent.status, 200, sent.text);
      assert.equal((await waitForStatus(b.sk, sent.body.data.emails[0].email, ['DELIVERED', 'FAILED'])).status, 'DELIVERED');
    }
    const totals = await assertExactTotals(b.sk, ['email.sent', 'email.delivered']);
    assert.equal(totals['email.delivered'], 2);
    assert.ok(totals['*'] > 2);
  });

  test('deleting a contact, or many in bulk, takes their events out of the total', async () => {
    const b = await bootstrap(server.api);
    const contacts: string[] = [];
    for (let i = 0; i < 4; i++) {
      contacts.push((await track(b, `gone-${i}@example.com`, 'visit')).contact);
      await track(b, `gone-${i}@example.com`, 'visit');
    }
    await track(b, 'stays@example.com', 'visit');
    assert.equal((await assertExactTotals(b.sk, ['visit'])).visit, 9);

    const one = await b.sk.delete(`/contacts/${contacts[0]}`);
    assert.equal(one.status, 204, one.text);
    assert.equal((await assertExactTotals(b.sk, ['visit'])).visit, 7);

    const bulk = await b.sk.post('/contacts/bulk-delete', { contactIds: contacts.slice(1) });
    assert.equal(bulk.status, 202, bulk.text);
    assert.equal((await waitForJob(b.sk, bulk.body.jobId)).status, 'completed');
    assert.deepEqual(await assertExactTotals(b.sk, ['visit']), { '*': 1, visit: 1 });
  });

  test('DELETE /events/:eventName empties its total; the name counts again from its next event', async () => {
    const b = await bootstrap(server.api);
    for (let i = 0; i < 3; i++) await track(b, 'named@example.com', 'doomed');
    await track(b, 'named@example.com', 'kept');
    const del = await b.sk.delete('/events/doomed');
    assert.equal(del.status, 204, del.text);
    let totals = await assertExactTotals(b.sk, ['doomed', 'kept']);
    assert.deepEqual([totals.doomed, totals.kept], [0, 1]);
    const usage = await b.sk.get('/events/doomed/usage');
    assert.equal(usage.body.eventCount, 0);

    await track(b, 'named@example.com', 'doomed');
    totals = await assertExactTotals(b.sk, ['doomed']);
    assert.equal(totals.doomed, 1);
    assert.equal((await b.sk.get('/events/doomed/usage')).body.eventCount, 1);
  });

  test('a project reset empties the total; deleting a project with events succeeds', async () => {
    const b = await bootstrap(server.api);
    await track(b, 'reset@example.com', 'before-reset');
    const reset = await server.api.post(`/users/@me/projects/${b.project.id}/reset`, undefined, { cookie: b.cookie });
    assert.equal(reset.status, 200, reset.text);
    assert.deepEqual(await assertExactTotals(b.sk, ['before-reset']), { '*': 0, 'before-reset': 0 });
    await track(b, 'reset@example.com', 'after-reset');
    assert.equal((await assertExactTotals(b.sk, ['after-reset']))['after-reset'], 1);

    const gone = await server.api.delete(`/users/@me/projects/${b.project.id}`, { cookie: b.cookie });
    assert.equal(gone.status, 204, gone.text);
    const [left] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM event_counts WHERE project_id = $1`, [b.project.id]);
    assert.equal(left.n, 0);
  });
});

describe('GET /events total under EVENT_RETENTION_DAYS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ EVENT_RETENTION_DAYS: '30' }, { clock });
  });
  after(() => server?.stop());

  async function trackAt(b: Bootstrapped, at: string, event: string): Promise<void> {
    fixed = new Date(at);
    try {
      await track(b, 'kept-for-a-while@example.com', event);
    } finally {
      fixed = null;
    }
  }

  async function maintainAt(at: string): Promise<Awaited<ReturnType<typeof maintainEventPartitions>>> {
    fixed = new Date(at);
    try {
      return await maintainEventPartitions(server.ctx);
    } finally {
      fixed = null;
    }
  }

  test('dropping whole months and trimming the straddling one take their events out of the total', async () => {
    const b = await bootstrap(server.api);
    await maintainAt('2030-02-15T00:00:00Z'); // February to May 2030 exist from here on
    await trackAt(b, '2030-03-05T10:00:00Z', 'march');
    await trackAt(b, '2030-04-05T10:00:00Z', 'april');
    await trackAt(b, '2030-05-10T10:00:00Z', 'early-may');
    await trackAt(b, '2030-05-25T10:00:00Z', 'late-may');
    await trackAt(b, '2030-06-15T10:00:00Z', 'june'); // in the default partition until June is created
    const names = ['march', 'april', 'early-may', 'late-may', 'june'];
    assert.deepEqual(await assertExactTotals(b.sk, names), { '*': 5, march: 1, april: 1, 'early-may': 1, 'late-may': 1, june: 1 });

    // Cutoff 21 May: March and April are dropped whole, 10 May is deleted from May, June moves out of the default partition.
    const run = await maintainAt('2030-06-20T00:00:00Z');
    assert.deepEqual(run.dropped, ['events_2030_02', 'events_2030_03', 'events_2030_04']);
    assert.equal(run.deleted, 1);
    assert.ok(run.created.includes('events_2030_06'));
    assert.deepEqual(await assertExactTotals(b.sk, names), { '*': 2, march: 0, april: 0, 'early-may': 0, 'late-may': 1, june: 1 });
  });
});
