import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { BULK_DELETE_EVENTS_PER_RUN } from '../src/modules/contacts/bulk/jobs.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { waitForJob } from './helpers/bulk.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A bulk delete of contacts with many events deletes those events in short batches first, at most
 * BULK_DELETE_EVENTS_PER_RUN a run, going to the back of the queue every project's bulk jobs share
 * between runs. Its contacts' rows then go in the job's one transaction. Before, 1,000 contacts of
 * 500 events were one 2.02 s statement in the worker, growing with the events, and the queue waited.
 */

let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Bots');
  b = await bootstrap(server.api, 'Other');
});
after(async () => server?.stop());

/** `n` events of `name` for the contact, written directly (the API would take minutes for these). */
async function seedEvents(projectId: string, contactId: string, name: string, n: number): Promise<void> {
  await server.sql(
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT 'evt_' || md5($2 || g::text), $1, $2, $3, '{}'::jsonb, now() - g * interval '1 ms' FROM generate_series(1, $4::int) AS g`,
    [projectId, contactId, name, n],
  );
}

test('a bulk delete of bots: their events go in runs, another project’s job goes between them, every count exact', { timeout: 120_000 }, async () => {
  const bots: string[] = [];
  for (let i = 0; i < 3; i++) {
    const made = await a.sk.post('/contacts', { email: `bot${i}@example.com` });
    bots.push(made.body.id);
    await seedEvents(a.project.id, made.body.id, 'page_view', 90_000);
  }
  const light: string[] = [];
  for (let i = 0; i < 2; i++) {
    const made = await a.sk.post('/contacts', { email: `person${i}@example.com` });
    light.push(made.body.id);
    await seedEvents(a.project.id, made.body.id, 'page_view', 5);
  }
  const keep = await a.sk.post('/contacts', { email: 'keep@example.com' });
  await seedEvents(a.project.id, keep.body.id, 'page_view', 7);
  assert.ok(3 * 90_000 > BULK_DELETE_EVENTS_PER_RUN, 'more than one run');
  const other = await b.sk.post('/contacts', { email: 'other@example.com' });

  const big = await a.sk.post('/contacts/bulk-delete', { contactIds: [...bots, ...light] });
  assert.equal(big.status, 202, big.text);
  // Queued while the first run deletes events: it runs before the bots' job goes on.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const small = await b.sk.post('/contacts/bulk-delete', { contactIds: [other.body.id] });
  assert.equal(small.status, 202, small.text);

  const smallJob = await waitForJob(b.sk, small.body.jobId, 60_000);
  const bigJob = await waitForJob(a.sk, big.body.jobId, 60_000);
  assert.equal(smallJob.status, 'completed');
  assert.equal(bigJob.status, 'completed', bigJob.failureReason);
  assert.equal(bigJob.succeeded, 5);
  assert.equal(bigJob.failed, 0);
  assert.ok(Date.parse(smallJob.completedAt!) < Date.parse(bigJob.completedAt!), 'the other project’s job went between the runs');

  for (const id of [...bots, ...light]) assert.equal((await a.sk.get(`/contacts/${id}`)).status, 404);
  const [left] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1`, [a.project.id]);
  assert.equal(left.n, 7, 'only the kept contact’s events');
  const [counted] = await server.sql<{ n: number }>(`SELECT coalesce(sum(count), 0)::int AS n FROM event_counts WHERE project_id = $1 AND name = 'page_view'`, [
    a.project.id,
  ]);
  assert.equal(counted.n, 7);
  const listed = await a.sk.get('/events?name=page_view');
  assert.equal(listed.body.total, 7);
});
