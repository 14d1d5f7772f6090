import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SEGMENT_DELETE_BATCH } from '../src/modules/segments/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { answeredWithin, answerOnceReleased, holdLock, within, statementWaitingOnALock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * DELETE /segments/:id of a segment with many members deletes them in short batches before the
 * segment row (segments/service.ts deleteSegment), not in one cascading statement. To keep a delete
 * under way for as long as a test needs, another transaction holds the row lock of the segment's
 * last member: the delete waits at its last batch, with every earlier batch committed.
 */

let server: TestServer;
let a: Bootstrapped;
const CONTACTS = 3000;
const DEFAULT_BATCH = { ...SEGMENT_DELETE_BATCH };
const contactId = (n: number) => `cnt_${n.toString(16).padStart(32, '0')}`;

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Segment deletes');
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'c' || g || '@sd.test', true, now(), now() FROM generate_series(1, $2::int) AS g`,
    [a.project.id, CONTACTS],
  );
  // Small batches, so a few thousand members take many.
  Object.assign(SEGMENT_DELETE_BATCH, { first: 200, min: 50, max: 200 });
});
after(async () => server?.stop());
after(() => Object.assign(SEGMENT_DELETE_BATCH, DEFAULT_BATCH));

/** A tracked STATIC segment whose members are the first `members` contacts, added in SQL. */
async function bigSegment(name: string, members: number): Promise<string> {
  const created = await a.sk.post('/segments', { name, type: 'STATIC', trackMembership: true });
  assert.equal(created.status, 201, created.text);
  await server.sql(
    `INSERT INTO segment_members (segment_id, contact_id) SELECT $1::uuid, 'cnt_' || lpad(to_hex(g), 32, '0') FROM generate_series(1, $2::int) AS g`,
    [created.body.id, members],
  );
  return created.body.id;
}

const rowsOf = async (segmentId: string) =>
  (
    await server.sql<{ segments: number; tracked: boolean | null; members: number }>(
      `SELECT (SELECT count(*) FROM segments WHERE id = $1)::int AS segments, (SELECT track_membership FROM segments WHERE id = $1) AS tracked,
              (SELECT count(*) FROM segment_members WHERE segment_id = $1)::int AS members`,
      [segmentId],
    )
  )[0];

/** Holds the row lock of the segment's last member in another transaction; the returned function lets it go. */
const lockLastMember = async (segmentId: string) =>
  (await holdLock(server.databaseUrl, 'SELECT contact_id FROM segment_members WHERE segment_id = $1 ORDER BY contact_id DESC LIMIT 1 FOR UPDATE', [segmentId]))
    .release;

const deleteWaitingOnALock = () => statementWaitingOnALock(server.sql, '%delete from%segment%');

describe('DELETE /segments/:id of a segment with many members', () => {
  test('stops tracking it, deletes its members in committed batches, refuses a second big delete with a 429, lets the project write meanwhile', async () => {
    const big = await bigSegment('Big', CONTACTS);
    const other = await bigSegment('Other', 1000);
    const unlock = await lockLastMember(big);
    const deleting = a.sk.delete(`/segments/${big}`);
    const done = await answerOnceReleased(unlock, deleting, async () => {
      await waitFor('the delete to wait for the locked last member', deleteWaitingOnALock, 30_000);

      // Every batch before the last one is committed: at most one batch of members is left, and
      // the segment no longer tracks membership (no recompute adds the members back).
      const during = await rowsOf(big);
      assert.ok(during.members >= 1 && during.members <= 200, `members left while the last batch waits: ${during.members} of ${CONTACTS}`);
      assert.equal(during.tracked, false);

      const second = await answeredWithin(5_000, a.sk.delete(`/segments/${other}`), 'a second big delete of the project waited instead of being refused');
      assert.equal(second.status, 429, second.text);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.equal(second.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(second.body.error.details, { retryAfter: 1, limit: 1 });
      assert.deepEqual(await rowsOf(other), { segments: 1, tracked: true, members: 1000 }, 'the refused delete changed nothing');

      // A contact whose membership went in an earlier batch is deleted at once.
      const contactGone = await answeredWithin(5_000, a.sk.delete(`/contacts/${contactId(2000)}`), 'a contact delete waited for the segment delete');
      assert.equal(contactGone.status, 204, contactGone.text);
    });
    assert.equal(done.status, 204, done.text);
    assert.deepEqual(await rowsOf(big), { segments: 0, tracked: null, members: 0 });
    assert.equal((await a.sk.get(`/segments/${big}`)).status, 404);
    // No membership event was written for the deleted members.
    const events = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name LIKE 'segment.big.%'`, [a.project.id]);
    assert.equal(events[0].n, 0);

    const again = await a.sk.delete(`/segments/${other}`);
    assert.equal(again.status, 204, again.text);
    assert.deepEqual(await rowsOf(other), { segments: 0, tracked: null, members: 0 });
  });

  test('a segment in use is still a 409 first, and nothing is deleted; a small segment is deleted at once', async () => {
    const used = await bigSegment('Used', 500);
    const user = await a.sk.post('/segments', {
      name: 'Uses it',
      condition: { logic: 'AND', groups: [{ filters: [{ field: `segment.${used}`, operator: 'memberOf' }] }] },
    });
    assert.equal(user.status, 201, user.text);
    const refused = await a.sk.delete(`/segments/${used}`);
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.details.segmentId, used);
    assert.match(refused.body.error.details.reasons[0], /referenced by segment 'Uses it'/);
    assert.deepEqual(await rowsOf(used), { segments: 1, tracked: true, members: 500 });

    const releases = [server.ctx.cascadeDeletes.take(a.project.id)];
    try {
      const small = await bigSegment('Small', 150);
      const deleted = await a.sk.delete(`/segments/${small}`);
      assert.equal(deleted.status, 204, deleted.text);
      assert.deepEqual(await rowsOf(small), { segments: 0, tracked: null, members: 0 });
    } finally {
      for (const release of releases) release();
    }
    assert.equal((await a.sk.delete(`/segments/${user.body.id}`)).status, 204);
    assert.equal((await a.sk.delete(`/segments/${used}`)).status, 204);
    assert.deepEqual(await rowsOf(used), { segments: 0, tracked: null, members: 0 });
  });

  test('a batch held past the 10 s bound stops the delete with a 409 saying how far it got; asked again, it finishes', { timeout: 60_000 }, async () => {
    const held = await bigSegment('Held', 1000);
    const release = await lockLastMember(held);
    let stopped: Res | 'still waiting';
    try {
      stopped = await within(30_000, a.sk.delete(`/segments/${held}`));
    } finally {
      await release();
    }
    assert.ok(stopped !== 'still waiting', 'the delete waited for the held member past its bound');
    assert.equal(stopped.status, 409, stopped.text);
    assert.equal(stopped.body.error.code, 'CONFLICT');
    const left = await rowsOf(held);
    assert.deepEqual(stopped.body.error.details, { segmentId: held, deletedMembers: 1000 - left.members });
    assert.ok(left.members >= 1 && left.members <= 200, `members left: ${left.members}`);
    assert.equal(left.segments, 1, 'the segment stays');
    assert.match(stopped.body.error.message, /stopped after \d+ members: .*at most 10 s\); ask again to finish/);
    const again = await a.sk.delete(`/segments/${held}`);
    assert.equal(again.status, 204, again.text);
    assert.deepEqual(await rowsOf(held), { segments: 0, tracked: null, members: 0 });
  });
});
