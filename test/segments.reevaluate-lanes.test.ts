import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { holdLock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * A contact's tracked segments are re-evaluated by jobs every project shares, ten at a time per
 * worker. A job first gets a quick 1 s; one that outruns it goes to a slow lane (one job at a time
 * per process), and its project's next jobs go there directly (segments/jobs.ts). Before, every
 * job had the full bounds in the shared lane, and one project whose segments are slow for its
 * contacts held each batch of ten for 2 s (its statements' bound): another project's contact
 * waited behind all of them.
 *
 * The slow project's segment row is held locked: its re-evaluations wait on it.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server?.stop());

const pro = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };

async function trackedSegment(p: Bootstrapped): Promise<string> {
  const made = await p.sk.post('/segments', { name: 'Pro', condition: pro, trackMembership: true });
  assert.equal(made.status, 201, made.text);
  return made.body.id;
}

/** A contact on the pro plan, through the API: its re-evaluation is queued. */
async function proContact(p: Bootstrapped, email: string): Promise<void> {
  const made = await p.sk.post('/contacts', { email, data: { plan: 'pro' } });
  assert.equal(made.status, 201, made.text);
}

/** The segment's row held locked: its re-evaluations wait on it. */
const lockSegment = (segmentId: string) => holdLock(server.databaseUrl, 'SELECT 1 FROM segments WHERE id = $1 FOR UPDATE', [segmentId]);

const memberCount = async (segmentId: string): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM segment_members WHERE segment_id = $1`, [segmentId]))[0].n;

const SLOW_CONTACTS = 60;

test(
  'one project’s slow re-evaluations go to the slow lane after a second; another project’s contact is re-evaluated meanwhile',
  { timeout: 120_000 },
  async (t) => {
    const slow = await bootstrap(server.api, 'Slow segments');
    const other = await bootstrap(server.api, 'Other project');
    const slowSegment = await trackedSegment(slow);
    const otherSegment = await trackedSegment(other);

    const lock = await lockSegment(slowSegment);
    let otherMs: number;
    try {
      for (let i = 0; i < SLOW_CONTACTS; i++) await proContact(slow, `slow${i}@example.com`);
      await proContact(other, 'other@example.com');
      const started = performance.now();
      await waitFor('the other project’s member', async () => (await memberCount(otherSegment)) === 1, 60_000, 20);
      otherMs = Math.round(performance.now() - started);
    } finally {
      await lock.release();
    }
    t.diagnostic(`the other project's contact was a member ${otherMs} ms after it was created, behind ${SLOW_CONTACTS} slow re-evaluations`);
    // Old: six batches of ten, each held 2 s by the lock, before it (12 s).
    assert.ok(otherMs < 5_000, `${otherMs} ms`);

    // The slow project's jobs went to the slow lane, the other's did not, and the lane does them once the lock is gone.
    const lane = await server.sql<{ project: string; n: number }>(
      `SELECT data->>'projectId' AS project, count(*)::int AS n FROM pgboss.job WHERE name = 'segments-reevaluate-contact-slow' GROUP BY 1`,
    );
    assert.deepEqual(
      lane.map((r) => r.project),
      [slow.project.id],
    );
    await waitFor(
      'the slow lane',
      async () =>
        (
          await server.sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'segments-reevaluate-contact-slow' AND state IN ('created', 'retry', 'active')`,
          )
        )[0].n === 0,
      60_000,
    );
    // While the lock was held, the slow lane skipped the contacts it reached (2 s each; the 5-minute recompute takes them).
    const members = await memberCount(slowSegment);
    t.diagnostic(`the slow project's segment: ${members} of ${SLOW_CONTACTS} contacts added by the slow lane`);
    assert.ok(members >= SLOW_CONTACTS - Math.ceil(otherMs / 2_000) - 1 && members <= SLOW_CONTACTS, `${members} members`);
    const [{ events, contacts }] = await server.sql<{ events: number; contacts: number }>(
      `SELECT count(*)::int AS events, count(DISTINCT contact_id)::int AS contacts FROM events WHERE project_id = $1 AND name = 'segment.pro.entry'`,
      [slow.project.id],
    );
    assert.deepEqual({ events, contacts }, { events: members, contacts: members }, 'one entry event for each member');
  },
);

test('slow projects take turns in the slow lane: another slow project’s contact does not wait behind all of one project’s', { timeout: 120_000 }, async (t) => {
  const hostile = await bootstrap(server.api, 'Slow for long');
  const unlucky = await bootstrap(server.api, 'Slow once');
  const hostileSegment = await trackedSegment(hostile);
  const unluckySegment = await trackedSegment(unlucky);

  const hostileLock = await lockSegment(hostileSegment);
  let ms: number;
  try {
    // The unlucky project's segment is slow once: its project goes to the slow lane.
    const unluckyLock = await lockSegment(unluckySegment);
    try {
      await proContact(unlucky, 'first@example.com');
      await waitFor('the unlucky project in the slow lane', async () => server.ctx.slowReevaluations.isSlow(unlucky.project.id), 30_000, 20);
    } finally {
      await unluckyLock.release();
    }
    for (let i = 0; i < 30; i++) await proContact(hostile, `long${i}@example.com`);
    await waitFor('the hostile project in the slow lane', async () => server.ctx.slowReevaluations.isSlow(hostile.project.id), 30_000, 20);
    await proContact(unlucky, 'second@example.com');
    const started = performance.now();
    await waitFor(
      'the unlucky project’s second contact',
      async () =>
        (
          await server.sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM segment_members m JOIN contacts c ON c.id = m.contact_id WHERE m.segment_id = $1 AND c.email = 'second@example.com'`,
            [unluckySegment],
          )
        )[0].n === 1,
      120_000,
      20,
    );
    ms = Math.round(performance.now() - started);
  } finally {
    await hostileLock.release();
  }
  t.diagnostic(`the unlucky project's contact was a member ${ms} ms after it was created, with 30 of the other slow project's jobs in the slow lane`);
  // Before, it waited behind the other project's jobs still queued in the lane: 2 s each while its segment was locked.
  assert.ok(ms < 10_000, `${ms} ms`);
});
