import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SLOW_REEVALUATION, reevaluateContact } from '../src/modules/segments/membership.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { holdLock, within } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A contact's tracked segments are re-evaluated by jobs every project shares, so each is bounded
 * (segments/membership.ts reevaluateContact): a segment's statements at 2 s (past it the segment is
 * skipped for that contact; the 5-minute recompute brings it in line), and a job at its budget.
 * Before, a segment read for one contact for as long as PostgreSQL took.
 *
 * A slow read is made deterministic by holding `segment_members` locked, which the re-evaluation
 * writes.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server?.stop());

const pro = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };

async function trackedSegments(p: Bootstrapped, names: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const name of names) {
    const made = await p.sk.post('/segments', { name, condition: pro, trackMembership: true });
    assert.equal(made.status, 201, made.text);
    ids.push(made.body.id);
  }
  return ids;
}

/** A contact on the pro plan, stored in SQL: no re-evaluation job is queued for it. */
async function proContact(p: Bootstrapped, email: string): Promise<string> {
  const id = `cnt_${email.replace(/\W/g, '_')}`;
  await server.sql(`INSERT INTO contacts (id, project_id, email, subscribed, data) VALUES ($1, $2, $3, true, '{"plan":"pro"}')`, [id, p.project.id, email]);
  return id;
}

/** The segment's tracked members (segment_members, what its entry and exit events follow). */
const membersOf = async (segmentId: string): Promise<string[]> =>
  (
    await server.sql<{ email: string }>(
      `SELECT c.email FROM segment_members m JOIN contacts c ON c.id = m.contact_id WHERE m.segment_id = $1 ORDER BY c.email`,
      [segmentId],
    )
  ).map((r) => r.email);

test('a segment whose statements pass 2 s for a contact is skipped for it; the job ends instead of waiting', { timeout: 60_000 }, async () => {
  const p = await bootstrap(server.api, 'Reevaluate bound');
  const [segment] = await trackedSegments(p, ['Pro']);
  const contactId = await proContact(p, 'slow@example.com');

  const lock = await holdLock(server.databaseUrl, 'LOCK TABLE segment_members IN ACCESS EXCLUSIVE MODE');
  const started = performance.now();
  const job = reevaluateContact(server.ctx, p.project.id, contactId);
  let answered: unknown;
  try {
    answered = await within(8_000, job);
  } finally {
    await lock.release();
  }
  await job;
  const ms = Math.round(performance.now() - started);
  assert.notEqual(answered, 'still waiting', 'the re-evaluation ended while segment_members was still locked');
  assert.ok(ms >= 1_900 && ms < 8_000, `ended after ${ms} ms (the bound is 2 s)`);
  assert.deepEqual(await membersOf(segment), [], 'skipped: nothing written');

  // Nothing is lost: the next re-evaluation (or the 5-minute recompute) brings the segment in line.
  await reevaluateContact(server.ctx, p.project.id, contactId);
  assert.deepEqual(await membersOf(segment), ['slow@example.com']);
  const [{ n }] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE contact_id = $1 AND name = 'segment.pro.entry'`, [contactId]);
  assert.equal(n, 1, 'one entry event');
});

test('a job stops at its budget after at least one segment; the rest wait for the 5-minute recompute', async () => {
  const p = await bootstrap(server.api, 'Reevaluate budget');
  const ids = await trackedSegments(p, ['First', 'Second', 'Third']);
  const contactId = await proContact(p, 'budget@example.com');

  assert.equal(await reevaluateContact(server.ctx, p.project.id, contactId, { ...SLOW_REEVALUATION, budgetMs: 0 }), 'done');
  assert.deepEqual(await Promise.all(ids.map((id) => membersOf(id))), [['budget@example.com'], [], []]);
  await reevaluateContact(server.ctx, p.project.id, contactId);
  assert.deepEqual(await Promise.all(ids.map((id) => membersOf(id))), [['budget@example.com'], ['budget@example.com'], ['budget@example.com']]);
});
