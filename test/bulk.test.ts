import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runBulk } from '../src/modules/contacts/bulk/jobs.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Api } from './helpers/http.ts';
import { type BulkJob, waitForJob } from './helpers/bulk.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

const BLK_ID = /^blk_[0-9a-f]{32}$/;

let server: TestServer;
let b: Bootstrapped;
let other: Bootstrapped;

before(async () => {
  server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' });
  b = await bootstrap(server.api, 'mine');
  other = await bootstrap(server.api, 'theirs');
});
after(async () => server?.stop());

async function runJob(api: Api, op: string, contactIds: string[]): Promise<BulkJob> {
  const res = await api.post(`/contacts/${op}`, { contactIds });
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(Object.keys(res.body).sort(), ['jobId', 'status']);
  assert.equal(res.body.status, 'queued');
  assert.match(res.body.jobId, BLK_ID);
  return waitForJob(api, res.body.jobId);
}

async function createContact(api: Api, email: string, subscribed: boolean): Promise<{ id: string; updatedAt: string }> {
  const res = await api.post('/contacts', { email, subscribed, data: { plan: 'pro' } });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const subscriptionEvents = (contactIds: string[]) =>
  server.sql<{ contact_id: string; name: string; data: unknown }>(
    'SELECT contact_id, name, data FROM events WHERE contact_id = ANY($1) ORDER BY contact_id, created_at',
    [contactIds],
  );

let n = 0;
const email = (tag: string) => `${tag}-${++n}@example.com`;

describe('POST /contacts/bulk-unsubscribe and bulk-subscribe', () => {
  test('unsubscribes the subscribed ones, reports unchanged and foreign ids, and emits one event per change', async () => {
    const subscribed = [await createContact(b.sk, email('s'), true), await createContact(b.sk, email('s'), true)];
    const already = await createContact(b.sk, email('u'), false);
    const foreign = await createContact(other.sk, email('f'), true);
    const missing = `cnt_${'0'.repeat(32)}`;
    const ids = [subscribed[0].id, already.id, foreign.id, subscribed[1].id, missing, 'not-an-id'];

    const job = await runJob(b.sk, 'bulk-unsubscribe', ids);
    assert.equal(job.type, 'bulk-unsubscribe');
    assert.equal(job.status, 'completed');
    assert.equal(job.total, 6);
    assert.equal(job.processed, 6);
    assert.equal(job.succeeded, 2);
    assert.equal(job.unchanged, 1);
    assert.equal(job.failed, 3);
    assert.deepEqual(job.errors, [
      { id: foreign.id, reason: 'not_found' },
      { id: missing, reason: 'not_found' },
      { id: 'not-an-id', reason: 'not_found' },
    ]);
    assert.equal(job.failureReason, undefined);
    assert.ok(Date.parse(job.completedAt!) >= Date.parse(job.createdAt));

    for (const c of subscribed) {
      const res = await b.sk.get(`/contacts/${c.id}`);
      assert.equal(res.body.subscribed, false);
      assert.ok(res.body.updatedAt > c.updatedAt);
    }
    const alreadyNow = await b.sk.get(`/contacts/${already.id}`);
    assert.equal(alreadyNow.body.updatedAt, already.updatedAt, 'an unchanged contact is not written');
    const foreignNow = await other.sk.get(`/contacts/${foreign.id}`);
    assert.equal(foreignNow.body.subscribed, true, "another project's contact is never touched");
    assert.equal(foreignNow.body.updatedAt, foreign.updatedAt);

    const events = await subscriptionEvents([...subscribed.map((c) => c.id), already.id, foreign.id]);
    assert.deepEqual(
      events,
      subscribed.map((c) => ({ contact_id: c.id, name: 'contact.unsubscribed', data: null })).sort((x, y) => x.contact_id.localeCompare(y.contact_id)),
    );

    // Subscribing them back: the two change (one event each), the already-subscribed one does not.
    const back = await runJob(b.sk, 'bulk-subscribe', [subscribed[0].id, subscribed[1].id, foreign.id]);
    assert.equal(back.type, 'bulk-subscribe');
    assert.deepEqual([back.total, back.succeeded, back.unchanged, back.failed], [3, 2, 0, 1]);
    const again = await runJob(b.sk, 'bulk-subscribe', [subscribed[0].id]);
    assert.deepEqual([again.total, again.succeeded, again.unchanged, again.failed], [1, 0, 1, 0]);
    const names = (await subscriptionEvents([subscribed[0].id])).map((e) => e.name);
    assert.deepEqual(names, ['contact.unsubscribed', 'contact.subscribed']);
  });

  test('each id counts once, and running a finished job again changes nothing', async () => {
    const c = await createContact(b.sk, email('d'), true);
    const job = await runJob(b.sk, 'bulk-unsubscribe', [c.id, c.id, c.id]);
    assert.deepEqual([job.total, job.processed, job.succeeded, job.unchanged, job.failed], [1, 1, 1, 0, 0]);
    await runBulk(server.ctx, job.jobId); // a duplicate delivery of the queue message
    const events = await subscriptionEvents([c.id]);
    assert.equal(events.length, 1);
    const res = await b.sk.get<BulkJob>(`/contacts/bulk/${job.jobId}`);
    assert.deepEqual(res.body, job);
  });

  test('1,000 ids in one job', async () => {
    const rows = await server.sql<{ id: string }>(
      `INSERT INTO contacts (id, project_id, email, subscribed, data)
       SELECT 'cnt_' || md5('bulk' || g), $1, 'many' || g || '@example.com', true, '{}'::jsonb
         FROM generate_series(1, 1000) AS g RETURNING id`,
      [b.project.id],
    );
    const job = await runJob(
      b.sk,
      'bulk-unsubscribe',
      rows.map((r) => r.id),
    );
    assert.deepEqual([job.total, job.succeeded, job.unchanged, job.failed], [1000, 1000, 0, 0]);
    const [{ n: events }] = await server.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'contact.unsubscribed' AND contact_id = ANY($2)",
      [b.project.id, rows.map((r) => r.id)],
    );
    assert.equal(events, 1000);
  });
});

describe('POST /contacts/bulk-delete', () => {
  test("deletes the project's contacts and their events; another project's contact is reported and kept", async () => {
    const mine = [await createContact(b.sk, email('del'), true), await createContact(b.sk, email('del'), false)];
    await b.sk.patch(`/contacts/${mine[0].id}`, { subscribed: false }); // gives it an event
    const foreign = await createContact(other.sk, email('keep'), true);
    const job = await runJob(b.sk, 'bulk-delete', [mine[0].id, foreign.id, mine[1].id]);
    assert.equal(job.type, 'bulk-delete');
    assert.deepEqual([job.total, job.processed, job.succeeded, job.unchanged, job.failed], [3, 3, 2, 0, 1]);
    assert.deepEqual(job.errors, [{ id: foreign.id, reason: 'not_found' }]);
    for (const c of mine) {
      const res = await b.sk.get(`/contacts/${c.id}`);
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'CONTACT_NOT_FOUND');
    }
    assert.deepEqual(await subscriptionEvents(mine.map((c) => c.id)), []);
    const kept = await other.sk.get(`/contacts/${foreign.id}`);
    assert.equal(kept.status, 200);

    const twice = await runJob(b.sk, 'bulk-delete', [mine[0].id]);
    assert.deepEqual([twice.succeeded, twice.failed], [0, 1]);
  });
});

describe('bulk input and job lookups', () => {
  test('1,001 ids, an empty list, a missing body, non-string ids and NUL characters are 422', async () => {
    const ids = Array.from({ length: 1001 }, (_, i) => `cnt_${String(i).padStart(32, '0')}`);
    const tooMany = await b.sk.post('/contacts/bulk-delete', { contactIds: ids });
    assert.equal(tooMany.status, 422);
    assert.equal(tooMany.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(tooMany.body.error.errors, [{ field: 'contactIds', message: 'At most 1000 contact ids per call', code: 'too_big' }]);
    const empty = await b.sk.post('/contacts/bulk-subscribe', { contactIds: [] });
    assert.equal(empty.status, 422);
    assert.equal(empty.body.error.errors[0].code, 'too_small');
    const none = await b.sk.post('/contacts/bulk-unsubscribe', {});
    assert.equal(none.status, 422);
    assert.equal(none.body.error.errors[0].field, 'contactIds');
    const numbers = await b.sk.post('/contacts/bulk-unsubscribe', { contactIds: [1, 2] });
    assert.equal(numbers.status, 422);
    assert.equal(numbers.body.error.errors[0].field, 'contactIds.0');
    const nul = await b.sk.post('/contacts/bulk-delete', { contactIds: ['cnt_\u0000'] });
    assert.equal(nul.status, 422);
    assert.equal(nul.body.error.errors[0].field, 'contactIds.0');
    const [{ n: jobs }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM bulk_jobs WHERE project_id = $1 AND total > 1000', [b.project.id]);
    assert.equal(jobs, 0);
  });

  test('exactly 1,000 ids are accepted', async () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `cnt_${String(i).padStart(32, 'f')}`);
    const job = await runJob(b.sk, 'bulk-subscribe', ids);
    assert.deepEqual([job.total, job.failed], [1000, 1000]);
  });

  test("an unknown, malformed, import or other project's job id is 404 JOB_NOT_FOUND (not shadowed by /contacts/:id)", async () => {
    const unknown = `blk_${'0'.repeat(32)}`;
    const res = await b.sk.get(`/contacts/bulk/${unknown}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'JOB_NOT_FOUND');
    assert.deepEqual(res.body.error.details, { resource: 'job', id: unknown });
    assert.equal((await b.sk.get('/contacts/bulk/whatever')).body.error.code, 'JOB_NOT_FOUND');
    assert.equal((await b.sk.get(`/contacts/bulk/imp_${'1'.repeat(32)}`)).body.error.code, 'JOB_NOT_FOUND');

    const c = await createContact(other.sk, email('o'), true);
    const theirs = await runJob(other.sk, 'bulk-unsubscribe', [c.id]);
    const peek = await b.sk.get(`/contacts/bulk/${theirs.jobId}`);
    assert.equal(peek.status, 404);
    assert.equal(peek.body.error.code, 'JOB_NOT_FOUND');
  });

  test('a session cookie with X-Project-Id works; no credentials is 401', async () => {
    const c = await createContact(b.sk, email('cookie'), true);
    const res = await server.api.post('/contacts/bulk-unsubscribe', { contactIds: [c.id] }, { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
    assert.equal(res.status, 202, res.text);
    const job = await waitForJob(b.sk, res.body.jobId);
    assert.equal(job.succeeded, 1);
    const anonymous = await server.api.post('/contacts/bulk-delete', { contactIds: [c.id] });
    assert.equal(anonymous.status, 401);
  });
});
