import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EVENT_DELETE_BATCH, EVENT_DELETES_PER_PROCESS } from '../src/modules/events/usage.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { answeredWithin, answerOnceReleased, holdLock, within, statementWaitingOnALock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * DELETE /events/:eventName deletes the name's events in short committed batches, one delete of
 * many events of a project at a time (a second is a 429 before any work), and keeps the event
 * counters and the analytics rollups exact. To keep a delete under way for as long as a test needs,
 * another transaction holds the row lock of the name's newest event: the delete stops at its last
 * batch, with every earlier batch committed.
 */

let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;
const N = 20_000;
const DAY = 86_400_000;
const contactId = (n: number) => `cnt_${n.toString(16).padStart(32, '0')}`;
const CUSTOM = `NOT (e.name LIKE 'email.%' OR e.name IN ('contact.subscribed', 'contact.unsubscribed') OR e.name LIKE 'segment.%.entry' OR e.name LIKE 'segment.%.exit')`;

/** `count` events of the name over the project's contacts `first`..`last`, one second apart, ending a day ago; with their rollups, as the track path writes them. */
async function generate(projectId: string, name: string, count: number, contacts: [number, number]): Promise<void> {
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1::text, 'c' || g || '-' || $1 || '@ed.test', true, now() - interval '30 days', now()
       FROM generate_series($2::int, $3::int) AS g ON CONFLICT DO NOTHING`,
    [projectId, contacts[0], contacts[1]],
  );
  // The counters follow by trigger; the rollups are added for exactly these events.
  await server.sql(
    `WITH inserted AS (
       INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT 'evt_' || md5($1::text || $2::text || g), $1::text, 'cnt_' || lpad(to_hex($4::int + g % ($5::int - $4::int + 1)), 32, '0'), $2, '{}'::jsonb,
              now() - interval '1 day' - make_interval(secs => g)
         FROM generate_series(1, $3::int) AS g
       RETURNING project_id, contact_id, name, created_at
     ), days AS (
       INSERT INTO event_name_days AS d (project_id, name, day, shard, count)
       SELECT project_id, name, (created_at AT TIME ZONE 'UTC')::date, 0, count(*) FROM inserted GROUP BY 1, 2, 3
       ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = d.count + excluded.count
     )
     INSERT INTO event_name_contacts (project_id, name, contact_id, first_at, last_at)
     SELECT project_id, name, contact_id, min(created_at), max(created_at) FROM inserted GROUP BY 1, 2, 3`,
    [projectId, name, count, contacts[0], contacts[1]],
  );
}

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Event deletes');
  b = await bootstrap(server.api, 'Bystander');
  await generate(a.project.id, 'ping', N, [1, 100]);
  await generate(a.project.id, 'pong', 500, [1, 100]);
  await generate(b.project.id, 'ping', 300, [1001, 1010]);
});
after(async () => server?.stop());

/** Holds the row lock of the newest event of the name (or of the contact) in another transaction; the returned function commits. */
async function lockNewestEvent(projectId: string, of: { name: string } | { contactId: string }): Promise<() => Promise<void>> {
  const [column, value] = 'name' in of ? ['name', of.name] : ['contact_id', of.contactId];
  const newest = `SELECT id FROM events WHERE project_id = $1 AND ${column} = $2 AND created_at = (SELECT max(created_at) FROM events WHERE project_id = $1 AND ${column} = $2)`;
  assert.equal((await server.sql(newest, [projectId, value])).length, 1);
  return (await holdLock(server.databaseUrl, `${newest} FOR UPDATE`, [projectId, value])).release;
}

const waitingDelete = () => waitFor('the delete to wait for the locked event', () => statementWaitingOnALock(server.sql, '%DELETE FROM events%'), 30_000);

const eventsOf = async (projectId: string, name: string): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = $2`, [projectId, name]))[0].n;

/**
 * The event counters (event_counts, event_day_counts) and the analytics rollups (event_name_days,
 * event_name_contacts) against the project's events: each row that differs. `midway`: while a
 * delete is under way (or stopped), a contact's first/last-seen rows may still span events already
 * deleted, but must span every event left.
 */
async function rollupMismatches(projectId: string, midway = false): Promise<Record<string, unknown[]>> {
  const diff = (actual: string, kept: string, key: string[], cmp: string) =>
    server.sql(
      `WITH actual AS (${actual}), kept AS (${kept})
       SELECT * FROM actual AS a FULL JOIN kept AS k USING (${key.join(', ')}) WHERE ${cmp}`,
      [projectId],
    );
  return {
    event_counts: await diff(
      `SELECT name, count(*) AS n FROM events WHERE project_id = $1 GROUP BY 1`,
      `SELECT name, sum(count) AS m FROM event_counts WHERE project_id = $1 GROUP BY 1 HAVING sum(count) <> 0`,
      ['name'],
      `a.n IS DISTINCT FROM k.m`,
    ),
    event_day_counts: await diff(
      `SELECT name, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM events WHERE project_id = $1 GROUP BY 1, 2`,
      `SELECT name, day, sum(count) AS m FROM event_day_counts WHERE project_id = $1 GROUP BY 1, 2 HAVING sum(count) <> 0`,
      ['name', 'day'],
      `a.n IS DISTINCT FROM k.m`,
    ),
    event_name_days: await diff(
      `SELECT name, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM events AS e WHERE project_id = $1 AND ${CUSTOM} GROUP BY 1, 2`,
      `SELECT name, day, sum(count) AS m FROM event_name_days WHERE project_id = $1 GROUP BY 1, 2 HAVING sum(count) <> 0`,
      ['name', 'day'],
      `a.n IS DISTINCT FROM k.m`,
    ),
    event_name_contacts: await diff(
      `SELECT name, contact_id, min(created_at) AS f, max(created_at) AS l FROM events AS e WHERE project_id = $1 AND contact_id IS NOT NULL AND ${CUSTOM} GROUP BY 1, 2`,
      `SELECT name, contact_id, first_at AS kf, last_at AS kl FROM event_name_contacts WHERE project_id = $1`,
      ['name', 'contact_id'],
      midway ? `a.f IS NOT NULL AND (k.kf IS NULL OR k.kf > a.f OR k.kl < a.l)` : `a.f IS DISTINCT FROM k.kf OR a.l IS DISTINCT FROM k.kl`,
    ),
  };
}

const exact = { event_counts: [], event_day_counts: [], event_name_days: [], event_name_contacts: [] };

async function topEvents(api: Bootstrapped['sk']): Promise<{ name: string; count: number; uniqueContacts: number }[]> {
  const from = new Date(Date.now() - 30 * DAY).toISOString();
  const to = new Date(Date.now() + DAY).toISOString();
  const res = await api.get(`/analytics/top-events?limit=10&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
  assert.equal(res.status, 200, res.text);
  return res.body.data;
}

describe('DELETE /events/:eventName under way', () => {
  test('runs in committed batches, refuses a second delete of the project with a 429, keeps the counters and rollups exact', async () => {
    assert.deepEqual(await rollupMismatches(a.project.id), exact, 'the generated data is consistent');
    const unlock = await lockNewestEvent(a.project.id, { name: 'ping' });
    const deleting = a.sk.delete('/events/ping');
    let tracked: Res | 'still waiting';
    const done = await answerOnceReleased(unlock, deleting, async () => {
      await waitingDelete();

      // Every batch before the last one is committed, its events out of the counters.
      const left = await eventsOf(a.project.id, 'ping');
      assert.ok(left >= 1 && left < N && left <= EVENT_DELETE_BATCH.max, `events of ping left while the last batch waits: ${left} of ${N}`);
      const usage = await a.sk.get('/events/ping/usage');
      assert.equal(usage.status, 200, usage.text);
      assert.equal(usage.body.eventCount, left);
      assert.deepEqual(await rollupMismatches(a.project.id, true), exact, 'counters and rollups midway');

      const second = await answeredWithin(5_000, a.sk.delete('/events/pong'), 'a second delete of the project waited instead of being refused');
      assert.equal(second.status, 429, second.text);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.equal(second.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(second.body.error.details, { retryAfter: 1, limit: 1 });
      assert.equal(await eventsOf(a.project.id, 'pong'), 500, 'the refused delete deleted nothing');

      // Tracking the name goes on meanwhile.
      tracked = await within(5_000, a.pk.post('/v1/track', { email: 'late@ed.test', event: 'ping' }));
      assert.ok(tracked !== 'still waiting', 'a track of the name waited for the delete');
      assert.equal(tracked.status, 200, tracked.text);

      const other = await answeredWithin(5_000, b.sk.delete('/events/ping'), 'another project’s delete waited');
      assert.equal(other.status, 204, other.text);
      assert.equal(await eventsOf(b.project.id, 'ping'), 0);
    });
    assert.equal(done.status, 204, done.text);

    // The event tracked while the delete ran went with a later batch, or stays (its batch had
    // passed): either way the counters and rollups count exactly what is left.
    const left = await eventsOf(a.project.id, 'ping');
    assert.ok(left <= 1, `events of ping left: ${left}`);
    assert.deepEqual(await rollupMismatches(a.project.id), exact, 'counters and rollups after the delete');
    assert.deepEqual(await rollupMismatches(b.project.id), exact);
    assert.equal((await a.sk.get('/events/ping/usage')).body.eventCount, left);
    assert.deepEqual(await topEvents(a.sk), [
      { name: 'pong', count: 500, uniqueContacts: 100 },
      ...(left === 1 ? [{ name: 'ping', count: 1, uniqueContacts: 1 }] : []),
    ]);
    const [{ n: nameDays }] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM event_name_days WHERE project_id = $1 AND name = 'ping'`, [
      a.project.id,
    ]);
    assert.ok(nameDays <= 1, `day rows of ping left: ${nameDays}`);

    // The slot is free again once the delete answered.
    const again = await a.sk.delete('/events/pong');
    assert.equal(again.status, 204, again.text);
    assert.equal(await eventsOf(a.project.id, 'pong'), 0);
    assert.deepEqual(await rollupMismatches(a.project.id), exact);
  });

  test(`past ${EVENT_DELETES_PER_PROCESS} deletes under way in the process, another project's is a 429 before any work`, async () => {
    await generate(b.project.id, 'kept', 10, [1001, 1002]);
    const releases = Array.from({ length: EVENT_DELETES_PER_PROCESS }, (_, i) => server.ctx.eventDeletes.take(`prj_elsewhere_${i}`));
    try {
      const refused = await b.sk.delete('/events/kept');
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.deepEqual(refused.body.error.details, { retryAfter: 1, limit: EVENT_DELETES_PER_PROCESS });
      assert.match(refused.body.error.message, /busy deleting events/);
      assert.equal(await eventsOf(b.project.id, 'kept'), 10);
    } finally {
      for (const release of releases) release();
    }
    const done = await b.sk.delete('/events/kept');
    assert.equal(done.status, 204, done.text);
    assert.equal(await eventsOf(b.project.id, 'kept'), 0);
  });

  test('a batch held past the 10 s bound stops the delete with a 409 saying how far it got; asked again, it finishes', { timeout: 60_000 }, async () => {
    const c = await bootstrap(server.api, 'Held event');
    const total = EVENT_DELETE_BATCH.first + 500;
    await generate(c.project.id, 'held', total, [2001, 2010]);
    const release = await lockNewestEvent(c.project.id, { name: 'held' });
    let stopped: Res;
    try {
      stopped = await c.sk.delete('/events/held');
    } finally {
      await release();
    }
    assert.equal(stopped.status, 409, stopped.text);
    assert.equal(stopped.body.error.code, 'CONFLICT');
    const left = await eventsOf(c.project.id, 'held');
    assert.ok(left >= 1 && left <= 500, `events left: ${left}`);
    assert.deepEqual(stopped.body.error.details, { eventName: 'held', deleted: total - left });
    assert.match(stopped.body.error.message, /stopped after \d+ events.*ask again to finish/);
    assert.deepEqual(await rollupMismatches(c.project.id, true), exact, 'the held batch was rolled back whole');

    const again = await c.sk.delete('/events/held');
    assert.equal(again.status, 204, again.text);
    assert.equal(await eventsOf(c.project.id, 'held'), 0);
    assert.deepEqual(await rollupMismatches(c.project.id), exact);
    assert.deepEqual(await topEvents(c.sk), []);
  });

  test('a name in use is still refused with 409 before any work, a reserved one with 400', async () => {
    const c = await bootstrap(server.api, 'Used event');
    await generate(c.project.id, 'used', 50, [3001, 3005]);
    const workflow = await c.sk.post('/workflows', { name: 'On used', eventName: 'used' });
    assert.equal(workflow.status, 201, workflow.text);
    const res = await c.sk.delete('/events/used');
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.error.code, 'CONFLICT');
    assert.equal(await eventsOf(c.project.id, 'used'), 50);
    const reserved = await c.sk.delete('/events/email.sent');
    assert.equal(reserved.status, 400, reserved.text);
    // Neither took the project's slot.
    assert.equal(server.ctx.eventDeletes.inFlight(c.project.id), 0);
  });
});

describe('DELETE /contacts/:id of a contact with many events', () => {
  test('deletes its events in committed batches before its row, which other writes do not wait for', async () => {
    const c = await bootstrap(server.api, 'Bot contact');
    const bot = 4001;
    const events = 3 * EVENT_DELETE_BATCH.first;
    await generate(c.project.id, 'tick', events, [bot, bot]);
    await generate(c.project.id, 'tock', 20, [bot + 1, bot + 2]);
    const unlock = await lockNewestEvent(c.project.id, { contactId: contactId(bot) });
    const deleting = c.sk.delete(`/contacts/${contactId(bot)}`);
    const done = await answerOnceReleased(unlock, deleting, async () => {
      await waitingDelete();
      const left = await eventsOf(c.project.id, 'tick');
      assert.ok(left >= 1 && left < events, `events of the contact left while the last batch waits: ${left} of ${events}`);
      assert.deepEqual(await rollupMismatches(c.project.id, true), exact, 'counters and rollups midway');

      // The contact's row is not held: a write to it goes through at once.
      const patched = await answeredWithin(
        5_000,
        c.sk.patch(`/contacts/${contactId(bot)}`, { data: { bot: true } }),
        'a PATCH of the contact waited for its events to go',
      );
      assert.equal(patched.status, 200, patched.text);

      // It holds the project's slot of deletes of many events.
      const name = await answeredWithin(5_000, c.sk.delete('/events/tock'));
      assert.equal(name.status, 429, name.text);
      assert.equal(await eventsOf(c.project.id, 'tock'), 20);
    });
    assert.equal(done.status, 204, done.text);
    assert.equal((await c.sk.get(`/contacts/${contactId(bot)}`)).status, 404);
    assert.equal(await eventsOf(c.project.id, 'tick'), 0);
    assert.deepEqual(await rollupMismatches(c.project.id), exact);
    assert.deepEqual(await topEvents(c.sk), [{ name: 'tock', count: 20, uniqueContacts: 2 }]);
    // A contact with few events is deleted as before, without a slot.
    const few = await c.sk.delete(`/contacts/${contactId(bot + 1)}`);
    assert.equal(few.status, 204, few.text);
    assert.deepEqual(await topEvents(c.sk), [{ name: 'tock', count: 10, uniqueContacts: 1 }]);
    assert.deepEqual(await rollupMismatches(c.project.id), exact);
  });
});
