import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { holdLock, waitingForLocks as waitingForLocksOf } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { CONDITION_STATEMENT_MS } from '../src/conditions/time-bound.ts';
import { HEAVY_READS_PER_PROJECT, HEAVY_READ_TIME, HEAVY_READ_WAIT_MS, heavyReads, heavyReadsPerProcess } from '../src/http/heavy-reads.ts';
import { CONTACTS_READ_STATEMENT_MS } from '../src/modules/contacts/heavy-read.ts';
import { EMAILS_LISTED_AT_ONCE } from '../src/modules/emails/service.ts';
import { SUPPRESSIONS_LISTED_AT_ONCE, SUPPRESSIONS_READ_STATEMENT_MS } from '../src/modules/suppressions/service.ts';
import { NUMBERED_LISTED_AT_ONCE } from '../src/db/page-budget.ts';
import { SEGMENTS_LISTED_AT_ONCE } from '../src/modules/segments/service.ts';
import { EVENTS_COUNTED_AT_ONCE } from '../src/modules/events/day-counts.ts';
import { CONTACT_EVENTS_AT_ONCE } from '../src/modules/events/list.ts';
import { EVENT_STATS_STATEMENT_MS } from '../src/modules/events/list.ts';

/**
 * Counts a request waits for whose cost grows with what the project stored (a condition over its
 * contacts, its events over a range) take one of the project's HEAVY_READS_PER_PROJECT slots and
 * one of the process's (a quarter of its pool): past either, a 429 at once. A count of events past
 * EVENT_STATS_STATEMENT_MS is a 422 asking for a shorter range. Counts are held here by locks on
 * the tables they read, which they wait for as they would for a long read.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer(); // DATABASE_POOL_SIZE 20: 5 heavy reads at once
});
after(async () => server?.stop());

async function projectWithEvents(name: string): Promise<Bootstrapped> {
  const p = await bootstrap(server.api, name);
  for (const email of ['a@example.com', 'b@example.com', 'a@example.com']) {
    assert.equal((await p.pk.post('/v1/track', { email, event: 'visit' })).status, 200);
  }
  return p;
}

const stats = (p: Bootstrapped) => p.sk.get('/events/stats');
const countVisitors = (p: Bootstrapped) =>
  p.sk.post('/segments/count', { condition: { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'endsWith', value: '@example.com' }] }] } });

/**
 * Until `n` heavy reads hold the process's slots and `n` statements wait for a lock. The slots
 * first: any session of the database waiting on the locked table counts as a lock waiter (a job of
 * the server's worker as well as the test's requests), so the lock waiters alone could be reached
 * before the reads the checks rely on held their slots.
 */
async function waitingForLocks(n: number): Promise<void> {
  for (let i = 0; i < 250 && server.ctx.heavyReads.slots.inFlight() < n; i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(server.ctx.heavyReads.slots.inFlight() >= n, `${n} heavy reads never held slots: ${server.ctx.heavyReads.slots.inFlight()} did`);
  await waitingForLocksOf(server.sql, n);
}

function assertBusy(res: Res, message: string): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.headers.get('retry-after'), '1');
  assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
  assert.match(res.body.error.message, new RegExp(`^${message}`));
}

/** `read` held behind a lock on `table` past its statement bound: a 503 QUERY_TIMEOUT saying `message`. */
async function assertTimesOut(table: string, read: () => Promise<Res>, message: string): Promise<void> {
  const lock = await holdLock(server.databaseUrl, `LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  try {
    const slow = read();
    await waitingForLocks(1);
    const res = await slow;
    assert.equal(res.status, 503, res.text);
    assert.equal(res.body.error.code, 'QUERY_TIMEOUT');
    assert.equal(res.body.error.message, message);
  } finally {
    await lock.release();
  }
}

const VISITS = [3, [{ name: 'visit', count: 3, uniqueContacts: 2 }]];
const counted = (res: Res) => {
  assert.equal(res.status, 200, res.text);
  return [res.body.total, res.body.events];
};

const PROJECT_FULL = `This project already has ${HEAVY_READS_PER_PROJECT} counts, searches or long lists over its stored data under way`;

/**
 * Runs `check` while the project's two slots are taken: by counts of its events (held by a lock on
 * the events) or by searches of its contacts (a lock on the contacts; each ends 503 after 10 s).
 */
async function whileSlotsTaken(p: Bootstrapped, check: () => Promise<void>, by: 'events' | 'contacts' = 'events'): Promise<void> {
  const lock = await holdLock(server.databaseUrl, `LOCK TABLE ${by} IN ACCESS EXCLUSIVE MODE`);
  const held: Promise<Res>[] = [];
  try {
    const take = () => (by === 'events' ? stats(p) : p.sk.get('/contacts?search=example'));
    held.push(take(), take());
    await waitingForLocks(2);
    await check();
  } finally {
    await lock.release();
    await Promise.allSettled(held);
  }
}

test('counts wait their turn per project and per process, and a count past its time bound changes nothing', async () => {
  assert.equal(HEAVY_READS_PER_PROJECT, 2);
  assert.equal(heavyReadsPerProcess(20), 5);
  const [a, b, c] = [await projectWithEvents('heavy A'), await projectWithEvents('heavy B'), await projectWithEvents('heavy C')];
  assert.deepEqual(counted(await stats(a)), VISITS);
  assert.deepEqual((await countVisitors(a)).body, { count: 2 });

  const events = await holdLock(server.databaseUrl, 'LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
  const contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
  const heldStats: Promise<Res>[] = [];
  const heldCounts: Promise<Res>[] = [];
  try {
    const started = performance.now();
    heldStats.push(stats(a));
    heldCounts.push(countVisitors(a));
    await waitingForLocks(2);
    // A's third count is refused at once, whatever it counts.
    assertBusy(await countVisitors(a), PROJECT_FULL);
    assertBusy(await stats(a), PROJECT_FULL);
    // B and C still have room in the process, until its five are taken; then a read waits in line
    // (HEAVY_READ_WAIT_MS) and is refused, the held counts being held longer.
    heldStats.push(stats(b));
    heldCounts.push(countVisitors(b), countVisitors(c));
    await waitingForLocks(5);
    const queued = performance.now();
    assertBusy(await stats(c), 'The server is busy counting and searching for other requests');
    const inLine = performance.now() - queued;
    assert.ok(inLine >= HEAVY_READ_WAIT_MS - 100, `refused after ${inLine.toFixed(0)} ms in line`);

    // The held counts run past their bounds: the event counts a 422 on `from`, the condition counts a 400.
    const [statsAnswers, countAnswers] = await Promise.all([Promise.all(heldStats), Promise.all(heldCounts)]);
    const elapsed = performance.now() - started;
    for (const res of statsAnswers) {
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.deepEqual(res.body.error.errors, [
        {
          field: 'from',
          code: 'range_too_large',
          message: `Counting this range's events took longer than ${EVENT_STATS_STATEMENT_MS / 1000} s: ask for a shorter range (from, to)`,
        },
      ]);
    }
    for (const res of countAnswers) {
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.error.message, new RegExp(`took longer than ${CONDITION_STATEMENT_MS / 1000} s`));
    }
    assert.ok(elapsed >= Math.min(EVENT_STATS_STATEMENT_MS, CONDITION_STATEMENT_MS) - 500, `the counts ended after ${elapsed.toFixed(0)} ms`);
  } finally {
    await contacts.release();
    await events.release();
    await Promise.allSettled([...heldStats, ...heldCounts]);
  }
  // Every slot was given back, and nothing was changed.
  for (const p of [a, b, c]) {
    assert.deepEqual(counted(await stats(p)), VISITS);
    assert.deepEqual((await countVisitors(p)).body, { count: 2 });
  }
  assert.deepEqual((await Promise.all([stats(a), stats(a)])).map(counted), [VISITS, VISITS]);
});

test('reads of the contact fields over the contacts take the same slots, and one past its time bound is a 503 that changes nothing', async () => {
  const p = await bootstrap(server.api, 'heavy fields');
  assert.equal((await p.sk.post('/contacts', { email: 'f@example.com', data: { plan: 'pro' } })).status, 201);
  const fields = () => p.sk.get('/contacts/fields');
  const values = () => p.sk.get('/contacts/fields/data.plan/values');
  const usage = () => p.sk.get('/contacts/fields/data.plan/usage');
  const LISTED = [...['email', 'subscribed', 'createdAt', 'updatedAt'].map((f) => [f, 1]), ['data.plan', 1]];
  const listed = (res: Res) => {
    assert.equal(res.status, 200, res.text);
    return res.body.fields.map((f: { field: string; coverage: number }) => [f.field, f.coverage]);
  };
  assert.deepEqual(listed(await fields()), LISTED);

  const contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
  const held: Promise<Res>[] = [];
  try {
    held.push(fields(), values());
    await waitingForLocks(2);
    assertBusy(await usage(), PROJECT_FULL);
    for (const res of await Promise.all(held)) {
      assert.equal(res.status, 503, res.text);
      assert.equal(res.body.error.code, 'QUERY_TIMEOUT');
      assert.equal(res.body.error.message, `Reading this project's contacts took longer than ${CONTACTS_READ_STATEMENT_MS / 1000} s`);
    }
  } finally {
    await contacts.release();
    await Promise.allSettled(held);
  }
  assert.deepEqual(listed(await fields()), LISTED);
  assert.deepEqual((await values()).body, { field: 'data.plan', values: ['pro'], count: 1 });
  assert.equal((await usage()).body.contactCount, 1);
});

test("a project's counts take at most their share of the time: past the burst a 429 says when, and other projects count on", async () => {
  // The default budget, 60 s at once and 15 s a minute, lowered so a count held 2 s passes its burst.
  assert.deepEqual(HEAVY_READ_TIME, { burstMs: 60_000, sustainedShare: 0.25 });
  const defaultReads = server.ctx.heavyReads;
  server.ctx.heavyReads = heavyReads(20, { burstMs: 1_000, sustainedShare: 0.25 });
  try {
    const [a, b] = [await projectWithEvents('budget A'), await projectWithEvents('budget B')];
    const contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
    let held: Promise<Res>;
    try {
      held = countVisitors(a);
      await waitingForLocks(1);
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      await contacts.release();
    }
    assert.deepEqual((await held).body, { count: 2 });
    const spent = server.ctx.heavyReads.time.spent(a.project.id);
    assert.ok(spent > 1_900 && spent < 3_000, `A's count was charged ${spent.toFixed(0)} ms`);

    // A is past its 1 s burst by about 1 s: 4 s to drain at a quarter. Every heavy read of A is refused, before it runs.
    for (const res of [await countVisitors(a), await stats(a)]) {
      assert.equal(res.status, 429, res.text);
      assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
      const retryAfter = Number(res.headers.get('retry-after'));
      assert.ok(retryAfter >= 3 && retryAfter <= 5, `Retry-After ${retryAfter}`);
      assert.deepEqual(res.body.error.details, { retryAfter, limit: 1 });
      assert.equal(
        res.body.error.message,
        `This project's counts, searches and long lists over its stored data have taken more than 1 s lately; past that, their share is 15 s a minute; try again in ${retryAfter} seconds`,
      );
    }
    // B has its own time.
    assert.deepEqual((await countVisitors(b)).body, { count: 2 });
    assert.deepEqual(counted(await stats(b)), VISITS);

    // Once A's time has drained under the burst (Retry-After), it counts again.
    const refusedAt = performance.now();
    const retryAfter = Number((await countVisitors(a)).headers.get('retry-after'));
    await new Promise((r) => setTimeout(r, retryAfter * 1000 - (performance.now() - refusedAt) + 100));
    assert.deepEqual((await countVisitors(a)).body, { count: 2 });
    assert.deepEqual(counted(await stats(a)), VISITS);
  } finally {
    server.ctx.heavyReads = defaultReads;
  }
});

test('a search of the contacts, or a subscription filter, is a heavy read: it takes a slot, is bounded in time, and a plain list is not', async () => {
  const p = await projectWithEvents('heavy search');
  const search = () => p.sk.get('/contacts?search=example');
  const found = (res: Res) => {
    assert.equal(res.status, 200, res.text);
    return [res.body.total, res.body.data.map((c: { email: string }) => c.email).sort()];
  };
  const BOTH = [2, ['a@example.com', 'b@example.com']];
  assert.deepEqual(found(await search()), BOTH);

  // The project's two slots taken by counts of its events: a search is refused, a plain list is not.
  await whileSlotsTaken(p, async () => {
    assertBusy(await search(), PROJECT_FULL);
    assertBusy(await p.sk.get('/contacts?subscribed=false'), PROJECT_FULL);
    assert.deepEqual(found(await p.sk.get('/contacts')), BOTH);
  });

  // A search held past its bound is a 503, and changes nothing.
  await assertTimesOut('contacts', search, `Reading this project's contacts took longer than ${CONTACTS_READ_STATEMENT_MS / 1000} s`);
  assert.deepEqual(found(await search()), BOTH);
});

test('an emails list that reads more than 10,000 emails (a contact’s, a campaign’s, a rare status’s) is a heavy read; a shorter one is not, and one of a status no email has is answered at once', async () => {
  assert.equal(EMAILS_LISTED_AT_ONCE, 10_000);
  const p = await projectWithEvents('heavy emails');
  const id = p.project.id;
  // cnt_he_1 has 10,001 emails (one in campaign "many", 10,000 transactional); campaign "many"
  // has 10,001 (one for each contact); cnt_he_2 has 1; campaign "few" has 2. All are SENT but two
  // DELIVERED, so a page of DELIVERED walks the project's 20,003 emails.
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data) SELECT 'cnt_he_' || g, $1, 'he' || g || '@example.com', true, '{}' FROM generate_series(1, 10001) g`,
    [id],
  );
  const [many] = await server.sql<{ id: string }>(
    `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status) VALUES (gen_random_uuid(), $1, 'many', 's', 'b', 'news@example.net', 'SENT') RETURNING id`,
    [id],
  );
  const [few] = await server.sql<{ id: string }>(
    `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status) VALUES (gen_random_uuid(), $1, 'few', 's', 'b', 'news@example.net', 'SENT') RETURNING id`,
    [id],
  );
  const emailsOf = (select: string, params: unknown[]) =>
    server.sql(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'b') RETURNING id)
       INSERT INTO emails (id, project_id, contact_id, campaign_id, to_email, from_email, type, subject_source, content_id, status, sent_at, created_at)
       SELECT gen_random_uuid(), $1, contact, campaign, 'x@example.com', 'news@example.net', 'MARKETING', 's', (SELECT id FROM c), 'SENT', now(), now() - g * interval '1 second'
         FROM (${select}) AS s(g, contact, campaign)`,
      [id, ...params],
    );
  await emailsOf(`SELECT g, 'cnt_he_' || g, $2::uuid FROM generate_series(1, 10001) g`, [many.id]);
  await emailsOf(`SELECT 10001 + g, 'cnt_he_1', NULL::uuid FROM generate_series(1, 10000) g`, []);
  await emailsOf(`SELECT 30000 + g, 'cnt_he_' || (10 + g), $2::uuid FROM generate_series(1, 2) g`, [few.id]);
  await server.sql(`UPDATE emails SET status = 'DELIVERED', delivered_at = now() WHERE project_id = $1 AND contact_id IN ('cnt_he_20', 'cnt_he_21')`, [id]);
  const totalOf = async (query: string) => {
    const res = await p.sk.get(`/emails?limit=1&${query}`);
    assert.equal(res.status, 200, `${query}: ${res.text}`);
    return res.body.total;
  };
  assert.equal(await totalOf('contactId=cnt_he_1'), 10_001);
  assert.equal(await totalOf(`campaignId=${many.id}`), 10_001);

  // The project's two slots taken by counts of its events: the long lists are refused, the short ones are not.
  await whileSlotsTaken(p, async () => {
    for (const query of ['contactId=cnt_he_1', `campaignId=${many.id}`, 'contactId=cnt_he_1&status=FAILED', 'status=DELIVERED']) {
      assertBusy(await p.sk.get(`/emails?${query}`), PROJECT_FULL);
    }
    assert.equal(await totalOf('contactId=cnt_he_2'), 1);
    assert.equal(await totalOf(`campaignId=${few.id}`), 2);
    assert.equal(await totalOf('status=SENT'), 20_001);
    assert.equal(await totalOf('status=BOUNCED'), 0);
    assert.equal(await totalOf(''), 20_003);
    const none = await p.sk.get('/emails?status=QUEUED');
    assert.deepEqual([none.status, none.body.data, none.body.hasMore, none.body.total], [200, [], false, 0]);
    assert.equal((await p.sk.get('/emails?status=QUEUED&cursor=nope')).status, 400);
  });
  const newest = await p.sk.get('/emails?limit=2&contactId=cnt_he_1');
  assert.deepEqual([newest.body.total, newest.body.data.map((e: { campaignId: string | null }) => e.campaignId)], [10_001, [many.id, null]]);
  const delivered = await p.sk.get('/emails?status=DELIVERED');
  assert.deepEqual([delivered.body.total, delivered.body.data.map((e: { to: string; status: string }) => e.status)], [2, ['DELIVERED', 'DELIVERED']]);
});

test('a search of the suppressions, or a reason so rare that its page walks more than 10,000, is a heavy read; a plain list is not, and a reason none has is answered at once', async () => {
  assert.equal(SUPPRESSIONS_LISTED_AT_ONCE, 10_000);
  const p = await projectWithEvents('heavy suppressions');
  // 10,000 bounces and, older than all of them, 2 complaints: a page of 21 complaints (the default
  // limit's 20 and one more) spreads over 105,021 suppressions by the counters, a page of bounces over 22.
  await server.sql(
    `INSERT INTO suppressions (project_id, email, reason, created_at)
     SELECT $1, 'hs' || g || '@example.com', CASE WHEN g > 10000 THEN 'complaint' ELSE 'bounce' END, now() - g * interval '1 second'
       FROM generate_series(1, 10002) g`,
    [p.project.id],
  );
  const listed = async (query: string) => {
    const res = await p.sk.get(`/suppressions?${query}`);
    assert.equal(res.status, 200, `${query}: ${res.text}`);
    return [res.body.total, res.body.data.length, res.body.data[0]?.email];
  };
  const search = () => p.sk.get('/suppressions?search=hs1000');

  // The project's two slots taken by counts of its events: a search and a rare reason's page are
  // refused, as is a later page of a reason none has (it would walk them all); the others are not.
  await whileSlotsTaken(p, async () => {
    assertBusy(await search(), PROJECT_FULL);
    assertBusy(await p.sk.get('/suppressions?search=no-such-address'), PROJECT_FULL);
    assertBusy(await p.sk.get('/suppressions?reason=complaint'), PROJECT_FULL);
    assert.deepEqual(await listed(''), [10_002, 20, 'hs1@example.com']);
    assert.deepEqual(await listed('reason=bounce'), [10_000, 20, 'hs1@example.com']);
    const none = await p.sk.get('/suppressions?reason=manual');
    assert.deepEqual([none.status, none.body.data, none.body.hasMore, none.body.total], [200, [], false, 0]);
    assert.equal((await p.sk.get('/suppressions?reason=manual&cursor=nope')).status, 400);
  });
  assert.deepEqual(await listed('search=hs1000'), [4, 4, 'hs1000@example.com']);
  assert.deepEqual(await listed('reason=complaint'), [2, 2, 'hs10001@example.com']);

  // A search held past its bound is a 503, and changes nothing.
  await assertTimesOut('suppressions', search, `Listing this project's suppressions took longer than ${SUPPRESSIONS_READ_STATEMENT_MS / 1000} s`);
  assert.deepEqual(await listed('search=hs1000'), [4, 4, 'hs1000@example.com']);
});

test('counting events over a range whose partial days hold more than 100,000 is a heavy read; a smaller count is not', async () => {
  assert.equal(EVENTS_COUNTED_AT_ONCE, 100_000);
  const [p, light] = [await projectWithEvents('heavy events'), await projectWithEvents('light events')];
  // `from` an hour ago, or today's first second when that was yesterday: a range with no `to`
  // counts its days from `from`'s next midnight on from the counters, so only events of `from`'s
  // own day are counted one by one. (With `from` yesterday, GET /activity was rightly light, and
  // its page waited for the contacts the test holds: a hang between 00:00 and 01:00 UTC.)
  const DAY_MS = 86_400_000;
  if (Date.now() % DAY_MS < 2_000) await new Promise((r) => setTimeout(r, 2_000));
  const now = Date.now();
  const from = new Date(Math.max(now - 3_600_000, now - (now % DAY_MS) + 1_000)).toISOString();
  await server.sql(
    `INSERT INTO events (id, project_id, name, created_at)
     SELECT 'evt_he_' || g, $1, 'visit', $2::timestamptz - g * interval '1 microsecond' FROM generate_series(1, 100000) g`,
    [p.project.id, new Date(now).toISOString()],
  );
  // The three tracked events are in every range, but for `from` when the test began just before midnight.
  const [since] = await server.sql<{ n: number; contacts: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT contact_id)::int AS contacts FROM events WHERE project_id = $1 AND created_at >= $2`,
    [p.project.id, from],
  );
  const recent = (x: Bootstrapped) => x.sk.get('/activity/recent-count?minutes=60');
  const counts = [
    () => recent(p),
    () => p.sk.get(`/activity/stats?from=${from}`),
    () => p.sk.get(`/analytics/top-events?from=${from}`),
    () => p.sk.get(`/activity?from=${from}&limit=1`),
  ];
  // Slots taken by searches: the counts over today's 100,003 events are refused; a count over 3 is not.
  await whileSlotsTaken(
    p,
    async () => {
      for (const count of counts) assertBusy(await count(), PROJECT_FULL);
    },
    'contacts',
  );
  await whileSlotsTaken(
    light,
    async () => {
      const res = await recent(light);
      assert.deepEqual([res.status, res.body.count], [200, 3]);
    },
    'contacts',
  );
  const answers = [];
  for (const count of counts) answers.push((await count()).body);
  assert.deepEqual(
    [answers[0].count, answers[1].total, answers[2].data, answers[3].total],
    [100_003, since.n, [{ name: 'visit', count: since.n, uniqueContacts: since.contacts }], since.n],
  );
});

test('a contact’s events past 10,000 are a heavy read to list and count; a contact with fewer is answered at once', async () => {
  assert.equal(CONTACT_EVENTS_AT_ONCE, 10_000);
  const p = await projectWithEvents('contact events');
  const contacts = (await p.sk.get('/contacts?sort=email&dir=asc')).body.data.map((c: { id: string }) => c.id);
  const [busy, quiet] = contacts;
  await server.sql(
    `INSERT INTO events (id, project_id, contact_id, name, created_at) SELECT 'evt_ce_' || g, $1, $2, 'visit', now() - g * interval '1 millisecond' FROM generate_series(1, 10000) g`,
    [p.project.id, busy],
  );
  const lists = (contactId: string) => [
    `/events/contact/${contactId}?limit=1`,
    `/events?contactId=${contactId}&limit=1`,
    `/activity?contactId=${contactId}&limit=1`,
  ];
  // The project's two slots taken in the process: the busy contact's lists are refused, the quiet one's answered.
  const held = [await server.ctx.heavyReads.slots.take(p.project.id), await server.ctx.heavyReads.slots.take(p.project.id)];
  try {
    for (const path of lists(busy)) assertBusy(await p.sk.get(path), PROJECT_FULL);
    for (const path of lists(quiet)) {
      const res = await p.sk.get(path);
      assert.deepEqual([path, res.status, res.body.total], [path, 200, 1]);
    }
  } finally {
    for (const release of held) release();
  }
  for (const path of lists(busy)) {
    const res = await p.sk.get(path);
    assert.deepEqual([path, res.status, res.body.total], [path, 200, 10_002]);
  }
});

test('a project’s templates or campaigns past 10,000 are a heavy read to list; 10,000 are not', async () => {
  assert.equal(NUMBERED_LISTED_AT_ONCE, 10_000);
  const p = await bootstrap(server.api, 'many templates');
  // 10,001 templates (one past), 10,000 campaigns (at the bound).
  const rows = (table: string, n: number) =>
    server.sql(
      `INSERT INTO ${table} (id, project_id, name, subject, body, from_email, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'Row ' || g, 's', 'b', 'a@example.net', now() - g * interval '1 second', now() - g * interval '1 second'
         FROM generate_series(1, $2::int) g`,
      [p.project.id, n],
    );
  await rows('templates', 10_001);
  await rows('campaigns', 10_000);
  const held = [await server.ctx.heavyReads.slots.take(p.project.id), await server.ctx.heavyReads.slots.take(p.project.id)];
  try {
    for (const path of ['/templates', '/templates?search=Row 9&page=2', '/templates?page=100&pageSize=100']) assertBusy(await p.sk.get(path), PROJECT_FULL);
    const campaigns = await p.sk.get('/campaigns?page=100&pageSize=100&sort=name&dir=asc');
    assert.deepEqual([campaigns.status, campaigns.body.total, campaigns.body.data.length], [200, 10_000, 100]);
  } finally {
    for (const release of held) release();
  }
  const last = await p.sk.get('/templates?page=101&pageSize=100');
  assert.deepEqual([last.status, last.body.total, last.body.data.map((t: { name: string }) => t.name)], [200, 10_001, ['Row 10001']]);
  const found = await p.sk.get('/templates?search=Row 1000');
  assert.deepEqual([found.body.total, found.body.data.map((t: { name: string }) => t.name).sort()], [3, ['Row 1000', 'Row 10000', 'Row 10001']]);
});

test('GET /segments of more than 100 segments is a heavy read; of 100, it is not', async () => {
  assert.equal(SEGMENTS_LISTED_AT_ONCE, 100);
  const p = await bootstrap(server.api, 'many segments');
  const add = (from: number, to: number) =>
    server.sql(
      `INSERT INTO segments (id, project_id, name, type, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'List ' || g, 'STATIC', now(), now() FROM generate_series($2::int, $3::int) g`,
      [p.project.id, from, to],
    );
  await add(1, 100);
  const held = [await server.ctx.heavyReads.slots.take(p.project.id), await server.ctx.heavyReads.slots.take(p.project.id)];
  try {
    const listed = await p.sk.get('/segments');
    assert.deepEqual([listed.status, listed.body.length], [200, 100]);
    await add(101, 101);
    assertBusy(await p.sk.get('/segments'), PROJECT_FULL);
  } finally {
    for (const release of held) release();
  }
  assert.equal((await p.sk.get('/segments')).body.length, 101);
});

test("when the process's slots are taken, a count waits in line, one per project, in the order they came, for a bounded time", async () => {
  const defaultReads = server.ctx.heavyReads;
  server.ctx.heavyReads = heavyReads(4, HEAVY_READ_TIME, 3_000); // a pool of 4: one heavy read at once; 3 s in line
  const inLine = async (n: number) => {
    for (let i = 0; i < 250 && server.ctx.heavyReads.slots.waiting() !== n; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(server.ctx.heavyReads.slots.waiting(), n);
  };
  const processFull = 'The server is busy counting and searching for other requests';
  try {
    const [a, b, c] = [await projectWithEvents('line A'), await projectWithEvents('line B'), await projectWithEvents('line C')];
    let contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
    const answered: string[] = [];
    const counting = (p: Bootstrapped, name: string) =>
      countVisitors(p).then((res) => {
        answered.push(name);
        return res;
      });
    try {
      const held = counting(a, 'a');
      await waitingForLocks(1);
      const waitingB = counting(b, 'b');
      await inLine(1);
      const waitingC = counting(c, 'c');
      await inLine(2);
      // One read per project in line: B's second is refused at once.
      assertBusy(await countVisitors(b), processFull);
      await new Promise((r) => setTimeout(r, 500));
      await contacts.release();
      // A's count ends, and the slot goes to B, then to C: none of them refused.
      for (const res of await Promise.all([held, waitingB, waitingC])) assert.deepEqual(res.body, { count: 2 });
      assert.deepEqual(answered, ['a', 'b', 'c']);
    } finally {
      await contacts.release();
    }

    // A read whose turn does not come within its time in line is refused then.
    contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
    try {
      const held = countVisitors(a);
      await waitingForLocks(1);
      const started = performance.now();
      assertBusy(await countVisitors(b), processFull);
      const waited = performance.now() - started;
      assert.ok(waited >= 2_900 && waited < 5_000, `refused after ${waited.toFixed(0)} ms in line`);
      await contacts.release();
      assert.deepEqual((await held).body, { count: 2 });
    } finally {
      await contacts.release();
    }
    assert.equal(server.ctx.heavyReads.slots.inFlight(), 0);
    assert.equal(server.ctx.heavyReads.slots.waiting(), 0);
  } finally {
    server.ctx.heavyReads = defaultReads;
  }
});
