import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import pg from 'pg';
import { monthUsage } from '../src/modules/billing/usage.ts';
import { PROJECT_PURGE_BATCH, PROJECT_PURGES_PER_PROCESS, PURGE_IN_REQUEST_MS } from '../src/modules/projects/purge.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { answeredWithin, answerOnceReleased, holdLock, within } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * A project reset and a project delete remove the rows in short batches (modules/projects/purge.ts),
 * not in one transaction. To keep one under way for as long as a test needs, another transaction
 * holds the row lock of one of the project's contacts: the purge waits at that batch, with every
 * earlier batch committed (the emails and events, which go before the contacts).
 */

let server: TestServer;
const CONTACTS = 3000;
const EVENTS = 6000;
const EMAILS = 2000;
const DEFAULT_BATCH = { ...PROJECT_PURGE_BATCH };

before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());
afterEach(() => Object.assign(PROJECT_PURGE_BATCH, DEFAULT_BATCH));

/** Small batches, so a few thousand rows take many. */
const smallBatches = () => Object.assign(PROJECT_PURGE_BATCH, { first: 200, min: 50, max: 200 });

/** A project with contacts, events and this month's delivered transactional emails, made in SQL. */
async function bigProject(name: string): Promise<Bootstrapped> {
  const b = await bootstrap(server.api, name);
  const p = b.project.id;
  const tag = p.slice(-8);
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 24, '0') || $3, $1, 'c' || g || '@purge.test', true, now(), now() FROM generate_series(1, $2::int) AS g`,
    [p, CONTACTS, tag],
  );
  await server.sql(
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT 'evt_' || lpad(to_hex(g), 24, '0') || $4, $1, 'cnt_' || lpad(to_hex(1 + g % $3), 24, '0') || $4, 'signed_in', '{}', now() - make_interval(secs => g)
       FROM generate_series(1, $2::int) AS g`,
    [p, EVENTS, CONTACTS, tag],
  );
  await server.sql(
    `WITH content AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, '<p>B</p>') RETURNING id)
     INSERT INTO emails (id, project_id, contact_id, to_email, from_email, type, subject_source, content_id, status, sent_at, delivered_at, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'cnt_' || lpad(to_hex(1 + g % $3), 24, '0') || $4, 'c' || g || '@purge.test', 'a@purge.test', 'TRANSACTIONAL', 'S',
            (SELECT id FROM content), 'DELIVERED', now(), now(), now() - make_interval(secs => g / 1000.0), now()
       FROM generate_series(1, $2::int) AS g`,
    [p, EMAILS, CONTACTS, tag],
  );
  return b;
}

const count = async (table: string, projectId: string): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${table === 'projects' ? 'id' : 'project_id'} = $1`, [projectId]))[0].n;

/** Holds the row lock of one of the project's contacts in another transaction; the returned function lets it go. */
const lockAContact = async (projectId: string) =>
  (await holdLock(server.databaseUrl, 'SELECT id FROM contacts WHERE project_id = $1 ORDER BY id DESC LIMIT 1 FOR UPDATE', [projectId])).release;

const reset = (b: Bootstrapped) => server.api.post(`/users/@me/projects/${b.project.id}/reset`, undefined, { cookie: b.cookie });

describe('POST /users/@me/projects/:id/reset at scale', () => {
  test('runs in committed batches; the project takes writes meanwhile; a second reset is 429; the answer counts every row deleted', async () => {
    smallBatches();
    const a = await bigProject('Reset big');
    const bystander = await bigProject('Reset bystander');
    const usageBefore = await monthUsage(server.ctx.database.db, a.project.id, new Date());
    assert.equal(usageBefore.transactional, EMAILS);
    const unlock = await lockAContact(a.project.id);
    const resetting = reset(a);
    const res = await answerOnceReleased(unlock, resetting, async () => {
      // Batches before the contacts committed while the reset waits for the held contact.
      await waitFor(
        'the emails and events to be gone while the reset waits',
        async () => (await count('emails', a.project.id)) + (await count('events', a.project.id)) === 0,
        15_000,
      );
      assert.equal(await within(0, resetting), 'still waiting');

      const written = await answeredWithin(2000, a.sk.post('/contacts', { email: 'new@purge.test' }), 'a write of the project waited for the reset');
      assert.equal(written.status, 201, written.text);

      const second = await answeredWithin(2000, reset(a), 'a second reset waited for the first');
      assert.equal(second.status, 429, second.text);
      assert.equal(second.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(second.body.error.details, { retryAfter: 1, limit: 1 });
    });
    assert.equal(res.status, 200, res.text);
    const left = await count('contacts', a.project.id);
    assert.ok(left <= 1, `contacts left: ${left}`); // the new one, when its batch had passed
    assert.deepEqual(res.body.deleted, {
      emails: EMAILS,
      events: EVENTS,
      campaigns: 0,
      segments: 0,
      workflows: 0,
      templates: 0,
      import_jobs: 0,
      bulk_jobs: 0,
      idempotency_keys: 0,
      contacts: CONTACTS + 1 - left,
      contact_fields: 0,
    });
    // The month's usage of the deleted emails was carried, batch by batch: the allowance is not given back.
    assert.deepEqual(await monthUsage(server.ctx.database.db, a.project.id, new Date()), usageBefore);
    assert.equal(await count('contacts', bystander.project.id), CONTACTS);
    assert.equal(await count('events', bystander.project.id), EVENTS);
    assert.equal(await count('emails', bystander.project.id), EMAILS);
  });

  test('a batch held past its bound stops the reset with a 409 saying what was deleted; asked again, it finishes', async () => {
    Object.assign(PROJECT_PURGE_BATCH, { first: 500, min: 50, max: 500, statementMs: 1000 });
    const a = await bigProject('Reset stopped');
    const unlock = await lockAContact(a.project.id);
    try {
      const stopped = await answeredWithin(15_000, reset(a), 'the reset waited for the held contact');
      assert.equal(stopped.status, 409, stopped.text);
      assert.equal(stopped.body.error.code, 'CONFLICT');
      const deleted = stopped.body.error.details.deleted;
      assert.equal(deleted.emails, EMAILS);
      assert.equal(deleted.events, EVENTS);
      assert.equal(deleted.contacts, CONTACTS - (await count('contacts', a.project.id)));
      assert.ok(deleted.contacts < CONTACTS);
      await unlock();
      const again = await reset(a);
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.deleted.contacts, CONTACTS - deleted.contacts);
      assert.equal(again.body.deleted.emails, 0);
      assert.equal(await count('contacts', a.project.id), 0);
    } finally {
      await unlock(); // lets go, if an assertion failed before it did
    }
  });

  test(`at most ${PROJECT_PURGES_PER_PROCESS} resets run in a process; another project's is 429 at once`, async () => {
    const owners = await Promise.all(Array.from({ length: PROJECT_PURGES_PER_PROCESS + 1 }, (_, i) => bootstrap(server.api, `Many ${i}`)));
    for (const b of owners) assert.equal((await b.sk.post('/contacts', { email: 'one@purge.test' })).status, 201);
    const unlocks = await Promise.all(owners.slice(0, PROJECT_PURGES_PER_PROCESS).map((b) => lockAContact(b.project.id)));
    const running = owners.slice(0, PROJECT_PURGES_PER_PROCESS).map(reset);
    try {
      await waitFor('the resets to wait for their held contacts', async () => server.ctx.projectPurges.inFlight() === PROJECT_PURGES_PER_PROCESS, 15_000);
      const refused = await answeredWithin(2000, reset(owners[PROJECT_PURGES_PER_PROCESS]));
      assert.equal(refused.status, 429, refused.text);
      assert.deepEqual(refused.body.error.details, { retryAfter: 1, limit: PROJECT_PURGES_PER_PROCESS });
      assert.equal(await count('contacts', owners[PROJECT_PURGES_PER_PROCESS].project.id), 1, 'the refused reset deleted nothing');
    } finally {
      for (const unlock of unlocks) await unlock();
    }
    for (const res of await Promise.all(running)) assert.equal(res.status, 200, res.text);
  });
});

describe('DELETE /users/@me/projects/:id at scale', () => {
  test('the project is gone for its users at once; its rows go in batches, in the request for 2 s at most, then in a job', async () => {
    smallBatches();
    const a = await bigProject('Delete big');
    const bystander = await bigProject('Delete bystander');
    assert.equal((await a.sk.get('/contacts')).status, 200);
    const unlock = await lockAContact(a.project.id);
    try {
      // The request purges for PURGE_IN_REQUEST_MS at most (here it stops at the held contact); the job does the rest.
      const del = await answeredWithin(
        PURGE_IN_REQUEST_MS + 2000,
        server.api.delete(`/users/@me/projects/${a.project.id}`, { cookie: a.cookie }),
        'the delete waited for the rows to go',
      );
      assert.equal(del.status, 204, del.text);
      const refused = await a.sk.get('/contacts');
      assert.equal(refused.status, 401, refused.text);
      assert.deepEqual((await server.api.get('/users/@me/projects', { cookie: a.cookie })).body, []);
      assert.equal((await server.api.get(`/projects/${a.project.id}/setup-state`, { cookie: a.cookie })).status, 404);
      assert.equal((await server.api.delete(`/users/@me/projects/${a.project.id}`, { cookie: a.cookie })).status, 404);
      const [row] = await server.sql('SELECT disabled, disabled_reason FROM projects WHERE id = $1', [a.project.id]);
      assert.deepEqual(row, { disabled: true, disabled_reason: 'DELETED' }, 'sends nothing more while its rows go');
      assert.equal((await count('emails', a.project.id)) + (await count('events', a.project.id)), 0, 'the batches before the held contact committed');
      assert.equal(await count('projects', a.project.id), 1);
      await unlock();
      await waitFor('the project row to go', async () => (await count('projects', a.project.id)) === 0, 30_000);
      for (const t of ['contacts', 'events', 'emails', 'memberships', 'domains']) assert.equal(await count(t, a.project.id), 0, t);
      assert.equal(await count('contacts', bystander.project.id), CONTACTS);
      assert.equal(await count('events', bystander.project.id), EVENTS);
    } finally {
      await unlock(); // lets go, if an assertion failed before it did
    }
  });

  test('what the request could not purge is purged by a durable job: a process without workers queues it, a later worker process does it', async () => {
    const api = await startTestServer({ PROCESS_ROLE: 'api' });
    let worker: TestServer | null = null;
    try {
      const b = await bootstrap(api.api, 'Delete later');
      assert.equal((await b.sk.post('/contacts', { email: 'x@purge.test' })).status, 201);
      const client = new pg.Client({ connectionString: api.databaseUrl });
      await client.connect();
      await client.query('BEGIN');
      await client.query('SELECT id FROM contacts WHERE project_id = $1 FOR UPDATE', [b.project.id]);
      try {
        const del = await answeredWithin(
          PURGE_IN_REQUEST_MS + 2000,
          api.api.delete(`/users/@me/projects/${b.project.id}`, { cookie: b.cookie }),
          'the delete waited for the rows to go',
        );
        assert.equal(del.status, 204);
        assert.equal((await b.sk.get('/contacts')).status, 401);
      } finally {
        await client.query('COMMIT');
        await client.end();
      }
      assert.equal((await api.sql('SELECT 1 FROM contacts WHERE project_id = $1', [b.project.id])).length, 1, 'left to the job');
      await api.stop();
      worker = await startTestServer({}, { databaseUrl: api.databaseUrl });
      const w = worker;
      await waitFor('the worker to purge the project', async () => (await w.sql('SELECT 1 FROM projects WHERE id = $1', [b.project.id])).length === 0, 30_000);
      assert.equal((await w.sql('SELECT 1 FROM contacts WHERE project_id = $1', [b.project.id])).length, 0);
    } finally {
      await worker?.stop();
    }
  });
});
