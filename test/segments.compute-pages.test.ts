import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { CONDITION_STATEMENT_MS } from '../src/conditions/time-bound.ts';
import { computeSegment } from '../src/modules/segments/membership.ts';
import { answerOnceReleased, holdLock, waitingForLocks } from './helpers/locks.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A tracked segment is computed 10,000 contacts a transaction (segments/membership.ts
 * computeSegment), within a time budget. Before, one statement wrote the whole membership: at a
 * million members it passed the 10 s condition bound, so the compute answered 400 ("use fewer or
 * simpler filters") for a one-filter segment, and the 5-minute job failed the same way every run.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
  // The 5-minute recompute would compute these segments too, whenever the clock passes a multiple
  // of five minutes: the cases compute them one call at a time and count what each call did.
  await server.ctx.jobs.boss.unschedule('segments-recompute');
});
after(() => server?.stop());

const CONTACTS = 12_000;
const pro = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };

async function projectWithProContacts(label: string): Promise<{ p: Bootstrapped; segmentId: string }> {
  const p = await bootstrap(server.api, label);
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at)
     SELECT 'cnt_' || $3 || '_' || g, $1, $3 || g || '@example.com', true, '{"plan":"pro"}', now() - (g % 7) * interval '1 second'
       FROM generate_series(1, $2::int) g`,
    [p.project.id, CONTACTS, label.toLowerCase()],
  );
  const made = await p.sk.post('/segments', { name: 'Pro', condition: pro, trackMembership: true });
  assert.equal(made.status, 201, made.text);
  return { p, segmentId: made.body.id };
}

/** Members, and entry / exit events per contact (each change fires once). */
async function tracked(p: Bootstrapped, segmentId: string) {
  const [row] = await server.sql<{ members: number; entries: number; exits: number; twice: number }>(
    `SELECT (SELECT count(*)::int FROM segment_members WHERE segment_id = $1) AS members,
            (SELECT count(*)::int FROM events WHERE project_id = $2 AND name = 'segment.pro.entry') AS entries,
            (SELECT count(*)::int FROM events WHERE project_id = $2 AND name = 'segment.pro.exit') AS exits,
            (SELECT count(*)::int FROM (SELECT contact_id FROM events WHERE project_id = $2 AND name = 'segment.pro.entry'
                                         GROUP BY contact_id HAVING count(*) > 1) AS d) AS twice`,
    [segmentId, p.project.id],
  );
  return row;
}

/** `request`'s answer once it has waited for `lock`, held until a second past the condition's bound from when it was sent. */
function heldPastConditionBound<T>(lock: { release: () => Promise<void> }, request: () => Promise<T>): Promise<T> {
  const started = Date.now();
  return answerOnceReleased(lock.release, request(), async () => {
    await waitingForLocks(server.sql, 1);
    await new Promise((r) => setTimeout(r, CONDITION_STATEMENT_MS + 1_000 - (Date.now() - started)));
  });
}

test('a compute of several pages adds and removes every member once, with one event each', { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Pages');
  const first = await p.sk.post(`/segments/${segmentId}/compute`);
  assert.equal(first.status, 200, first.text);
  assert.deepEqual(first.body, { added: CONTACTS, removed: 0, total: CONTACTS });
  assert.deepEqual(await tracked(p, segmentId), { members: CONTACTS, entries: CONTACTS, exits: 0, twice: 0 });

  // Every third contact leaves, straight in the database, so only a compute can notice.
  await server.sql(`UPDATE contacts SET data = '{"plan":"free"}' WHERE project_id = $1 AND substring(id from '[0-9]+$')::int % 3 = 0`, [p.project.id]);
  const leavers = Math.floor(CONTACTS / 3);
  const second = await p.sk.post(`/segments/${segmentId}/compute`);
  assert.equal(second.status, 200, second.text);
  assert.deepEqual(second.body, { added: 0, removed: leavers, total: CONTACTS - leavers });
  assert.deepEqual(await tracked(p, segmentId), { members: CONTACTS - leavers, entries: CONTACTS, exits: leavers, twice: 0 });
});

test('past its budget a compute stops after a page with 503, keeping what it did; the next one goes on from there', { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Budget');
  await assert.rejects(computeSegment(server.ctx, p.project.id, segmentId, 0), (err: Error & { statusCode?: number; code?: string; details?: unknown }) => {
    assert.equal(err.statusCode, 503);
    assert.equal(err.code, 'QUERY_TIMEOUT');
    assert.equal(
      err.message,
      "Computing this segment's membership took longer than 0 s: the 10000 additions and 0 removals made so far are kept, and the next compute (every 5 minutes) goes on",
    );
    assert.deepEqual(err.details, { added: 10_000, removed: 0 });
    return true;
  });
  assert.deepEqual(await tracked(p, segmentId), { members: 10_000, entries: 10_000, exits: 0, twice: 0 });
  // The next compute starts after the last page done: with no budget either, it gets to the end.
  // (Before, it started again from the first page, and one page at a time never got further.)
  assert.deepEqual(await computeSegment(server.ctx, p.project.id, segmentId, 0), { added: CONTACTS - 10_000, removed: 0, total: CONTACTS });
  assert.deepEqual(await tracked(p, segmentId), { members: CONTACTS, entries: CONTACTS, exits: 0, twice: 0 });

  // Having got to the end, the next compute starts from the first contact again: a change on the
  // first page is seen.
  await server.sql(`UPDATE contacts SET data = '{"plan":"free"}' WHERE id = (SELECT id FROM contacts WHERE project_id = $1 ORDER BY created_at, id LIMIT 1)`, [
    p.project.id,
  ]);
  await assert.rejects(computeSegment(server.ctx, p.project.id, segmentId, 0), (err: Error & { details?: unknown }) => {
    assert.deepEqual(err.details, { added: 0, removed: 1 });
    return true;
  });
  const rest = await p.sk.post(`/segments/${segmentId}/compute`);
  assert.equal(rest.status, 200, rest.text);
  assert.deepEqual(rest.body, { added: 0, removed: 0, total: CONTACTS - 1 });
});

test('a changed condition starts the next compute from the first contact, whatever a stopped one had reached', { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Changed');
  await assert.rejects(computeSegment(server.ctx, p.project.id, segmentId, 0), (err: Error & { details?: unknown }) => {
    assert.deepEqual(err.details, { added: 10_000, removed: 0 });
    return true;
  });
  // The new condition leaves out the first contact only: a compute from the first page removes it,
  // one after the stopped one's cursor would not. (Leaving everyone out would remove 10,000 in one
  // page: that statement passed its 10 s bound on a loaded CI machine.)
  const [{ email }] = await server.sql<{ email: string }>(`SELECT email FROM contacts WHERE project_id = $1 ORDER BY created_at, id LIMIT 1`, [p.project.id]);
  const allButFirst = {
    logic: 'AND',
    groups: [
      {
        filters: [
          { field: 'data.plan', operator: 'equals', value: 'pro' },
          { field: 'email', operator: 'notEquals', value: email },
        ],
      },
    ],
  };
  const patched = await p.sk.patch(`/segments/${segmentId}`, { condition: allButFirst });
  assert.equal(patched.status, 200, patched.text);
  const next = await p.sk.post(`/segments/${segmentId}/compute`);
  assert.equal(next.status, 200, next.text);
  assert.deepEqual(next.body, { added: CONTACTS - 10_000, removed: 1, total: CONTACTS - 1 });
});

test('a page whose removal waits for a lock past the condition bound is not answered as a costly condition', { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Locked');
  const first = await p.sk.post(`/segments/${segmentId}/compute`);
  assert.equal(first.status, 200, first.text);
  const [{ id }] = await server.sql<{ id: string }>(`SELECT id FROM contacts WHERE project_id = $1 ORDER BY created_at, id LIMIT 1`, [p.project.id]);
  await server.sql(`UPDATE contacts SET data = '{"plan":"free"}' WHERE id = $1`, [id]);
  // Another transaction holds the leaver's membership row (a contact delete cascading, say) for
  // longer than the condition's 10 s: the condition's read does not wait for it, the removal does.
  const lock = await holdLock(server.databaseUrl, 'SELECT 1 FROM segment_members WHERE segment_id = $1 AND contact_id = $2 FOR UPDATE', [segmentId, id]);
  const done = await heldPastConditionBound(lock, () => p.sk.post(`/segments/${segmentId}/compute`));
  // Before, the read and the removal were one statement under the condition's bound: 400 "use fewer or simpler filters".
  assert.equal(done.status, 200, done.text);
  assert.deepEqual(done.body, { added: 0, removed: 1, total: CONTACTS - 1 });
  assert.deepEqual(await tracked(p, segmentId), { members: CONTACTS - 1, entries: CONTACTS, exits: 1, twice: 0 });
});

test("a contact deleted between a page's read and its writes: the page is read again without it", { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Deleted');
  const [{ id }] = await server.sql<{ id: string }>(`SELECT id FROM contacts WHERE project_id = $1 ORDER BY created_at, id LIMIT 1`, [p.project.id]);
  // The delete is under way when the page reads the contact; the insert's foreign key check waits
  // for it, and fails once it commits.
  const deleter = new pg.Client({ connectionString: server.databaseUrl });
  await deleter.connect();
  try {
    await deleter.query('BEGIN');
    await deleter.query('DELETE FROM contacts WHERE id = $1', [id]);
    const computing = p.sk.post(`/segments/${segmentId}/compute`);
    await waitingForLocks(server.sql, 1);
    await deleter.query('COMMIT');
    const done = await computing;
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(done.body, { added: CONTACTS - 1, removed: 0, total: CONTACTS - 1 });
  } finally {
    await deleter.end();
  }
  assert.deepEqual(await tracked(p, segmentId), { members: CONTACTS - 1, entries: CONTACTS - 1, exits: 0, twice: 0 });
});

test("a PATCH that waits for the segment's row past the condition bound is not answered as a costly condition", { timeout: 120_000 }, async () => {
  const { p, segmentId } = await projectWithProContacts('Patched');
  // Another transaction holds the segment's row (a compute's page, say) for longer than the condition's 10 s.
  const lock = await holdLock(server.databaseUrl, 'SELECT 1 FROM segments WHERE id = $1 FOR UPDATE', [segmentId]);
  const patched = await heldPastConditionBound(lock, () => p.sk.patch(`/segments/${segmentId}`, { name: 'Pro customers' }));
  // Before, the lock wait was under the condition's bound: 400 "use fewer or simpler filters".
  assert.equal(patched.status, 200, patched.text);
  assert.equal(patched.body.name, 'Pro customers');
  assert.equal(patched.body.memberCount, CONTACTS);
});
