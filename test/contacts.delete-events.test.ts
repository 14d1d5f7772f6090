import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { recordEvents } from '../src/modules/events/record.ts';
import { storageMaintenanceQueue } from '../src/modules/retention/jobs.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { waitForStatus } from './helpers/mail.ts';
import { waitForJob } from './helpers/bulk.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { testClock } from './helpers/workflows.ts';

/**
 * Events have no foreign keys (migration 0025: their checks were about 40 % of an event insert's
 * time). A contact's delete deletes its events itself, and storage maintenance deletes them once
 * more a minute later, for an event a writer that held no lock on the contact committed just after.
 */

const clock = testClock();
let server: TestServer;
before(async () => {
  server = await startTestServer({}, { clock });
});
after(async () => server?.stop());

const maintain = () => storageMaintenanceQueue.handler(server.ctx, {}, { id: 'test' });

/** Every event of the project a client reads through the cursors: [name, contactId] pairs, and the first page's total. */
async function listed(b: Bootstrapped): Promise<{ events: [string, string | null][]; total: number }> {
  const events: [string, string | null][] = [];
  let cursor: string | undefined;
  let total = -1;
  for (let page = 0; page < 20; page++) {
    const res = await b.sk.get(`/events?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, res.text);
    if (!cursor) total = res.body.total;
    for (const e of res.body.data) events.push([e.name, e.contactId ?? null]);
    if (!res.body.hasMore) return { events, total };
    cursor = res.body.cursor;
  }
  throw new Error('more than 20 pages');
}

const track = async (b: Bootstrapped, email: string, event: string): Promise<string> => {
  const res = await b.sk.post('/events/track', { email, event });
  assert.equal(res.status, 200, res.text);
  const [contact] = await server.sql<{ id: string }>('SELECT id FROM contacts WHERE project_id = $1 AND email = $2', [b.project.id, email]);
  return contact.id;
};

describe('deleting contacts without the events’ foreign keys', () => {
  test('events and emails name no contact by a foreign key; a deleted contact’s tracked and email events go with it, its emails stay without it, another’s stay, totals exact', async () => {
    const keys = await server.sql<{ conname: string }>(
      `SELECT conname FROM pg_constraint WHERE contype = 'f' AND (conrelid = 'events'::regclass OR (conrelid = 'emails'::regclass AND conname LIKE '%contact%'))`,
    );
    assert.deepEqual(keys, []);

    const b = await bootstrap(server.api);
    const gone = await track(b, 'gone@example.com', 'visit');
    await track(b, 'gone@example.com', 'visit');
    const stays = await track(b, 'stays@example.com', 'visit');
    const sent = await b.sk.post('/v1/send', { to: 'gone@example.com', from: 'hello@sandbox.herald.test', subject: 'Hi', body: '<p>Hi</p>' });
    assert.equal(sent.status, 200, sent.text);
    assert.equal((await waitForStatus(b.sk, sent.body.data.emails[0].email, ['DELIVERED', 'FAILED'])).status, 'DELIVERED');
    const before = await listed(b);
    assert.ok(before.events.filter(([name, c]) => c === gone && name.startsWith('email.')).length >= 2, JSON.stringify(before));
    assert.equal(before.total, before.events.length);

    const del = await b.sk.delete(`/contacts/${gone}`);
    assert.equal(del.status, 204, del.text);
    const afterDelete = await listed(b);
    assert.deepEqual(afterDelete.events, [['visit', stays]]);
    assert.equal(afterDelete.total, 1);
    assert.equal((await b.sk.get(`/events/contact/${gone}`)).status, 404);
    const email = await b.sk.get(`/emails/${sent.body.data.emails[0].email}`);
    assert.equal(email.status, 200, email.text);
    assert.deepEqual([email.body.status, email.body.contactId], ['DELIVERED', null]);

    // Bulk: the other contact, with its event.
    const bulk = await b.sk.post('/contacts/bulk-delete', { contactIds: [stays] });
    assert.equal(bulk.status, 202, bulk.text);
    assert.equal((await waitForJob(b.sk, bulk.body.jobId)).status, 'completed');
    assert.deepEqual(await listed(b), { events: [], total: 0 });
    const remembered = await server.sql<{ contact_id: string }>('SELECT contact_id FROM deleted_contacts WHERE project_id = $1 ORDER BY contact_id', [
      b.project.id,
    ]);
    assert.deepEqual(
      remembered.map((r) => r.contact_id),
      [gone, stays].sort(),
    );
  });

  test('an event or email committed for a contact just after its delete is brought in line by the first storage maintenance a minute on; the contact is then forgotten', async () => {
    const b = await bootstrap(server.api);
    const gone = await track(b, 'late@example.com', 'visit');
    const stays = await track(b, 'kept@example.com', 'visit');
    const sent = await b.sk.post('/v1/send', { to: 'kept@example.com', from: 'hello@sandbox.herald.test', subject: 'Hi', body: '<p>Hi</p>' });
    assert.equal(sent.status, 200, sent.text);
    const emailId = sent.body.data.emails[0].email;
    assert.equal((await waitForStatus(b.sk, emailId, ['DELIVERED', 'FAILED'])).status, 'DELIVERED');
    const eventsOfSend = (await listed(b)).events.length - 2;
    assert.equal((await b.sk.delete(`/contacts/${gone}`)).status, 204);
    // An email naming the deleted contact, as a campaign batch whose audience was read before the delete writes one.
    await server.sql('UPDATE emails SET contact_id = $1 WHERE id = $2', [gone, emailId]);
    const contactOf = async () => {
      const res = await b.sk.get(`/emails/${emailId}`);
      assert.equal(res.status, 200, res.text);
      return res.body.contactId;
    };
    assert.equal(await contactOf(), gone);
    // Written as the service writes events, by writers that locked neither the contact nor its email
    // (a transient bounce's event, say), committed after the delete. (A tracked event cannot be: its
    // first/last-seen row keeps a foreign key to the contact, and its writer upserts the contact.)
    await recordEvents(server.ctx.database.db, [
      { projectId: b.project.id, contactId: gone, name: 'email.bounced', data: {} },
      { projectId: b.project.id, contactId: gone, name: 'email.opened', data: {}, createdAt: new Date(Date.now() - 2 * 86_400_000) },
    ]);
    const late = await listed(b);
    assert.equal(late.events.length, 3 + eventsOfSend);
    assert.equal(late.total, 3 + eventsOfSend);

    await maintain();
    assert.equal((await listed(b)).events.length, 3 + eventsOfSend, 'before the minute, the sweep leaves the contact alone');
    assert.equal(await contactOf(), gone);

    clock.advance(61_000);
    await maintain();
    const swept = await listed(b);
    assert.deepEqual(
      swept.events.filter(([, c]) => c !== stays),
      [],
    );
    assert.deepEqual([swept.events.filter(([name]) => name === 'visit').length, swept.total], [1, 1 + eventsOfSend]);
    assert.equal(await contactOf(), null);
    const remembered = await server.sql('SELECT 1 FROM deleted_contacts WHERE contact_id = $1', [gone]);
    assert.equal(remembered.length, 0);
  });
});
