import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { holdLock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { EVENT_STATS_PER_PROCESS, EVENT_STATS_PER_PROJECT } from '../src/modules/events/usage.ts';
import { EVENT_STATS_STATEMENT_MS } from '../src/modules/events/list.ts';

/**
 * GET /events/stats reads every event of its range (a year of 5M events: seconds of a PostgreSQL
 * backend), so a process counts at most EVENT_STATS_PER_PROJECT ranges of one project and
 * EVENT_STATS_PER_PROCESS in all at once (429 past them, at once), and a count that runs past
 * EVENT_STATS_STATEMENT_MS is a 422 asking for a shorter range. Counts are held here by a lock on
 * the events table, which they wait for as they would for a long read.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
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

/** Waits until `n` counts wait for the lock on the events table. */
async function countsWaiting(n: number): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const [{ waiting }] = await server.sql<{ waiting: number }>(
      `SELECT count(*)::int AS waiting FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%GROUP BY e.name, e.contact_id%'`,
    );
    if (waiting >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`${n} counts never waited for the lock`);
}

function assertBusy(res: Res, message: string): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.headers.get('retry-after'), '1');
  assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
  assert.match(res.body.error.message, new RegExp(`^${message}`));
}

const counted = (res: Res) => {
  assert.equal(res.status, 200, res.text);
  return [res.body.total, res.body.events];
};
const VISITS = [3, [{ name: 'visit', count: 3, uniqueContacts: 2 }]];

test('counts wait their turn per project and per process, and a count past the time bound is a 422 that changes nothing', async () => {
  assert.equal(EVENT_STATS_PER_PROJECT, 2);
  assert.equal(EVENT_STATS_PER_PROCESS, 4);
  const [a, b, c] = [await projectWithEvents('stats A'), await projectWithEvents('stats B'), await projectWithEvents('stats C')];
  assert.deepEqual(counted(await stats(a)), VISITS);

  const lock = await holdLock(server.databaseUrl, 'LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
  let held: Promise<Res>[] = [];
  try {
    const started = performance.now();
    held = [stats(a), stats(a)];
    await countsWaiting(2);
    // A's third count is refused at once; B still has room in the process, C no longer.
    assertBusy(await stats(a), `This project already has ${EVENT_STATS_PER_PROJECT} event counts under way`);
    held.push(stats(b), stats(b));
    await countsWaiting(4);
    assertBusy(await stats(c), 'The server is busy counting events');

    // The held counts run past the bound: each a 422 on `from`, after about EVENT_STATS_STATEMENT_MS.
    const answers = await Promise.all(held);
    const elapsed = performance.now() - started;
    for (const res of answers) {
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
    assert.ok(elapsed >= EVENT_STATS_STATEMENT_MS - 500, `the counts ended after ${elapsed.toFixed(0)} ms`);
  } finally {
    await lock.release();
    await Promise.allSettled(held);
  }
  // Every slot was given back, and nothing was changed.
  for (const p of [a, b, c]) assert.deepEqual(counted(await stats(p)), VISITS);
  assert.deepEqual((await Promise.all([stats(a), stats(a)])).map(counted), [VISITS, VISITS]);
});
