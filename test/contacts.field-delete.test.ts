import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FIELD_DELETE_BATCH, FIELD_DELETES_PER_PROCESS } from '../src/modules/contacts/fields.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { answeredWithin, answerOnceReleased, holdLock, statementWaitingOnALock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * DELETE /contacts/fields/:field rewrites the project's contacts in short batches, one delete of a
 * project at a time (a second is a 429 before any work). To keep a delete under way for as long as
 * a test needs, another transaction holds the row lock of the project's last contact: the delete
 * stops at its last batch, with every earlier batch committed.
 */

let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;
const N = 20_000;
const FIELDS = { f0: 'zero', f1: 'one' };
const contactId = (n: number) => `cnt_${n.toString(16).padStart(32, '0')}`;
const firstId = contactId(1);
const lastId = contactId(N);

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Field deletes');
  b = await bootstrap(server.api, 'Bystander');
  // Created one millisecond apart, so the contacts' (created_at, id) order is their number's.
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'c' || g || '@fd.test', true, $2::jsonb,
            now() - make_interval(secs => ($3 - g) / 1000.0), now()
       FROM generate_series(1, $3::int) AS g`,
    [a.project.id, JSON.stringify(FIELDS), N],
  );
  await server.sql(`INSERT INTO contact_fields (project_id, key, type) VALUES ($1, 'f0', 'string'), ($1, 'f1', 'string')`, [a.project.id]);
  for (const email of ['b1@fd.test', 'b2@fd.test']) {
    const res = await b.sk.post('/contacts', { email, data: { f0: 'b' } });
    assert.equal(res.status, 201, res.text);
  }
});
after(async () => server?.stop());

/** Holds the row lock of one contact in another transaction; the returned function lets it go. */
const lockContact = async (id: string) => (await holdLock(server.databaseUrl, 'SELECT id FROM contacts WHERE id = $1 FOR UPDATE', [id])).release;

const contactsWith = async (projectId: string, key: string): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND data ? $2`, [projectId, key]))[0].n;

describe('DELETE /contacts/fields/:field under way', () => {
  test('runs in committed batches, refuses a second delete of the project with a 429, lets writes and other projects through', async () => {
    const unlock = await lockContact(lastId);
    const deleting = a.sk.delete('/contacts/fields/data.f0');
    const done = await answerOnceReleased(unlock, deleting, async () => {
      await waitFor('the delete to wait for the locked last contact', () => statementWaitingOnALock(server.sql, '%UPDATE contacts%'), 30_000);

      // Every batch before the last one is committed: at most one batch of contacts still has the field.
      const left = await contactsWith(a.project.id, 'f0');
      assert.ok(left >= 1 && left <= FIELD_DELETE_BATCH.max, `contacts still with f0 while the last batch waits: ${left} of ${N}`);

      const second = await answeredWithin(5_000, a.sk.delete('/contacts/fields/data.f1'), 'a second delete of the project waited instead of being refused');
      assert.equal(second.status, 429, second.text);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.equal(second.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(second.body.error.details, { retryAfter: 1, limit: 1 });
      assert.equal(await contactsWith(a.project.id, 'f1'), N, 'the refused delete touched no contact');

      // A write to a contact whose batch has passed takes its row lock at once, and writes the field back.
      const patched = await answeredWithin(
        5_000,
        a.sk.patch(`/contacts/${firstId}`, { data: { f0: 'back' } }),
        'a PATCH of a contact waited for the whole delete',
      );
      assert.equal(patched.status, 200, patched.text);
      assert.deepEqual(patched.body.data, { f0: 'back', f1: 'one' });

      const other = await answeredWithin(5_000, b.sk.delete('/contacts/fields/data.f0'), 'another project’s delete waited');
      assert.equal(other.status, 200, other.text);
      assert.deepEqual(other.body, { deletedFrom: 2 });
    });
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(done.body, { deletedFrom: N });

    // The contact written back keeps its value, and the write typed the field again, so it is listed.
    assert.equal(await contactsWith(a.project.id, 'f0'), 1);
    const first = await a.sk.get(`/contacts/${firstId}`);
    assert.deepEqual(first.body.data, { f0: 'back', f1: 'one' });
    const last = await a.sk.get(`/contacts/${lastId}`);
    assert.deepEqual(last.body.data, { f1: 'one' });
    const fields = await a.sk.get('/contacts/fields');
    assert.deepEqual(
      fields.body.fields.filter((f: { isCustom: boolean }) => f.isCustom),
      [
        { field: 'data.f0', type: 'string', isCustom: true, coverage: 1 / N },
        { field: 'data.f1', type: 'string', isCustom: true, coverage: 1 },
      ],
    );

    // The slot is free again once the delete answered.
    const again = await a.sk.delete('/contacts/fields/data.f0');
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, { deletedFrom: 1 });
  });

  test(`past ${FIELD_DELETES_PER_PROCESS} deletes under way in the process, another project's is a 429 before any work`, async () => {
    const releases = Array.from({ length: FIELD_DELETES_PER_PROCESS }, (_, i) => server.ctx.fieldDeletes.take(`prj_elsewhere_${i}`));
    try {
      const refused = await b.sk.delete('/contacts/fields/data.nothing');
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.deepEqual(refused.body.error.details, { retryAfter: 1, limit: FIELD_DELETES_PER_PROCESS });
      assert.match(refused.body.error.message, /busy deleting fields/);
    } finally {
      for (const release of releases) release();
    }
    const unknown = await b.sk.delete('/contacts/fields/data.nothing');
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.body.error.code, 'FIELD_NOT_FOUND');
  });

  test('a batch held past the 10 s bound stops the delete with a 409 saying how far it got; asked again, it finishes', { timeout: 60_000 }, async () => {
    const c = await bootstrap(server.api, 'Held contact');
    const ids: string[] = [];
    for (const email of ['h1@fd.test', 'h2@fd.test', 'h3@fd.test']) {
      const res = await c.sk.post('/contacts', { email, data: { g: 'x' } });
      assert.equal(res.status, 201, res.text);
      ids.push(res.body.id);
    }
    const release = await lockContact(ids[2]);
    let stopped: Res;
    try {
      stopped = await c.sk.delete('/contacts/fields/data.g');
    } finally {
      await release();
    }
    assert.equal(stopped.status, 409, stopped.text);
    assert.equal(stopped.body.error.code, 'CONFLICT');
    assert.deepEqual(stopped.body.error.details, { field: 'data.g', deletedFrom: 0 });
    assert.match(stopped.body.error.message, /took longer than 10 s .*ask again to finish/);
    assert.equal(await contactsWith(c.project.id, 'g'), 3, 'the held batch was rolled back whole');
    const again = await c.sk.delete('/contacts/fields/data.g');
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, { deletedFrom: 3 });
    assert.equal(await contactsWith(c.project.id, 'g'), 0);
  });

  test('a field in use is still refused with 409 and nothing is removed', async () => {
    const segment = await a.sk.post('/segments', {
      name: 'Uses f1',
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.f1', operator: 'equals', value: 'one' }] }] },
    });
    assert.equal(segment.status, 201, segment.text);
    const res = await a.sk.delete('/contacts/fields/data.f1');
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.error.code, 'CONFLICT');
    assert.equal(await contactsWith(a.project.id, 'f1'), N);
    const fields = await a.sk.get('/contacts/fields');
    assert.ok(fields.body.fields.some((f: { field: string }) => f.field === 'data.f1'));
  });
});
