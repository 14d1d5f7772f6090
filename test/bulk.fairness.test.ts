import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { waitForJob } from './helpers/bulk.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * Every project's bulk jobs share one first-in-first-out queue: a project may have at most 5 queued
 * or running, so another project's job never waits behind more than 5 jobs of 1,000 contacts.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

async function seedContacts(p: Bootstrapped, n: number, tag: string): Promise<string[]> {
  const rows = await server.sql<{ id: string }>(
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT 'cnt_' || md5($3 || g), $1, $3 || g || '@example.org', true, '{}'::jsonb
       FROM generate_series(1, $2::int) AS g RETURNING id`,
    [p.project.id, n, `${tag}-${p.project.id}-`],
  );
  return rows.map((r) => r.id);
}

const activeJobsInDb = async (p: Bootstrapped): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM bulk_jobs WHERE project_id = $1 AND status IN ('queued', 'processing')`, [p.project.id]))[0]
    .n;

function assertCapReached(res: Res): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.headers.get('retry-after'), '2');
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
  assert.equal(res.body.error.statusCode, 429);
  assert.equal(res.body.error.message, 'This project already has 5 bulk jobs queued or running; try again in 2 seconds');
  assert.deepEqual(res.body.error.details, { retryAfter: 2, limit: 5 });
}

/** Runs `fn` while the project's jobs cannot finish: another transaction holds a lock on one of their contacts. */
async function withJobsHeld<T>(contactId: string, fn: () => Promise<T>): Promise<T> {
  const other = await server.ctx.database.pool.connect();
  try {
    await other.query('BEGIN');
    await other.query('SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE', [contactId]);
    return await fn();
  } finally {
    await other.query('COMMIT');
    other.release();
  }
}

const postMany = (p: Bootstrapped, n: number, contactIds: string[]): Promise<Res[]> =>
  Promise.all(Array.from({ length: n }, (_, i) => p.sk.post(`/contacts/${i % 2 === 0 ? 'bulk-unsubscribe' : 'bulk-subscribe'}`, { contactIds })));

describe('bulk jobs per project', () => {
  test('12 concurrent posts: exactly 5 are queued, 7 are 429 with Retry-After; once they finish the project can post again', async () => {
    const a = await bootstrap(server.api, 'capped');
    const ids = await seedContacts(a, 1000, 'cap');
    // Held, so that no job finishes (and frees its slot) while the 12 are answered.
    const answers = await withJobsHeld(ids[0], () =>
      Promise.all(Array.from({ length: 12 }, () => a.sk.post('/contacts/bulk-unsubscribe', { contactIds: ids }))),
    );
    const accepted = answers.filter((r) => r.status === 202);
    const refused = answers.filter((r) => r.status !== 202);
    assert.equal(accepted.length, 5, answers.map((r) => r.status).join(','));
    assert.equal(refused.length, 7);
    refused.forEach(assertCapReached);
    const [{ n: stored }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM bulk_jobs WHERE project_id = $1', [a.project.id]);
    assert.equal(stored, 5, 'a refused post stores no job');

    // The five run in order: the first unsubscribes all 1,000, the other four find them unsubscribed.
    const done = [];
    for (const r of accepted) done.push(await waitForJob(a.sk, r.body.jobId, 60_000));
    assert.deepEqual(
      done.map((j) => [j.status, j.total, j.succeeded + j.unchanged, j.failed]),
      Array(5).fill(['completed', 1000, 1000, 0]),
    );
    assert.deepEqual(
      done.map((j) => j.succeeded).sort((x, y) => y - x),
      [1000, 0, 0, 0, 0],
    );
    const [{ n: events }] = await server.sql<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'contact.unsubscribed'", [
      a.project.id,
    ]);
    assert.equal(events, 1000);

    assert.equal(await activeJobsInDb(a), 0);
    const again = await withJobsHeld(ids[0], async () => {
      // Each would subscribe the 1,000 contacts the first five unsubscribed, so each waits for the
      // held one. (An unsubscribe would change nothing, wait for no lock and free its slot at once.)
      const five = await Promise.all(Array.from({ length: 5 }, () => a.sk.post('/contacts/bulk-subscribe', { contactIds: ids })));
      assert.deepEqual(
        five.map((r) => r.status),
        [202, 202, 202, 202, 202],
      );
      assertCapReached(await a.sk.post('/contacts/bulk-delete', { contactIds: ids }));
      return five;
    });
    for (const r of again) await waitForJob(a.sk, r.body.jobId, 60_000);
  });

  test("another project's job of one contact completes within seconds while one project keeps itself at the cap", async () => {
    const a = await bootstrap(server.api, 'flooding');
    const victim = await bootstrap(server.api, 'victim');
    const aIds = await seedContacts(a, 1000, 'flood');
    const [victimId] = await seedContacts(victim, 1, 'victim');

    // The flood of the audit: many jobs of 1,000 contacts, well within 1,000 requests a minute.
    const flood: Res[] = [];
    for (let i = 0; i < 5; i++) flood.push(...(await postMany(a, 20, aIds)));
    assert.ok((await activeJobsInDb(a)) > 0, 'the flooding project has jobs ahead of the victim');

    // It keeps refilling its slots while the victim's job waits.
    let flooding = true;
    const refill = (async () => {
      while (flooding) {
        await postMany(a, 2, aIds);
        await sleep(100);
      }
    })();
    const t0 = performance.now();
    const posted = await victim.sk.post('/contacts/bulk-unsubscribe', { contactIds: [victimId] });
    assert.equal(posted.status, 202, posted.text);
    const job = await waitForJob(victim.sk, posted.body.jobId, 60_000);
    const waitedMs = performance.now() - t0;
    flooding = false;
    await refill;
    assert.deepEqual([job.status, job.total, job.succeeded, job.unchanged, job.failed], ['completed', 1, 1, 0, 0]);
    // Behind 5 jobs of 1,000 contacts (about 0.3 s each alone); behind the uncapped flood it was over 30 s.
    assert.ok(waitedMs < 10_000, `the victim's job took ${Math.round(waitedMs)} ms`);
    assert.ok(flood.filter((r) => r.status === 429).length > 50, 'most of the flood was refused');
  });

  test('a job left unfinished for over an hour (its worker died on the last attempt) no longer holds a slot', async () => {
    const a = await bootstrap(server.api, 'stale');
    const ids = await seedContacts(a, 1, 'stale');
    const insertUnfinished = (age: string) =>
      server.sql(
        `INSERT INTO bulk_jobs (id, project_id, type, status, contact_ids, total, attempts, created_at)
         SELECT 'blk_' || md5(random()::text), $1, 'bulk-subscribe', 'processing', $2, 1, 3, now() - $3::interval FROM generate_series(1, 5)`,
        [a.project.id, ids, age],
      );
    await insertUnfinished('61 minutes');
    const res = await a.sk.post('/contacts/bulk-unsubscribe', { contactIds: ids });
    assert.equal(res.status, 202, res.text);
    const job = await waitForJob(a.sk, res.body.jobId, 60_000);
    assert.deepEqual([job.status, job.succeeded], ['completed', 1]);

    await insertUnfinished('59 minutes');
    assertCapReached(await a.sk.post('/contacts/bulk-subscribe', { contactIds: ids }));
  });
});
