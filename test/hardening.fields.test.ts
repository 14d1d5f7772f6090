import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** Issue 14 finding 7: custom fields are capped per project, the listing works for any count, and pk_ cannot re-subscribe. */

let server: TestServer;

before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

const keys = (n: number, prefix: string) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));

describe('custom field cap', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api, 'field cap');
  });

  test('a write that would pass 500 custom fields is 422 and changes nothing; the fields listing still answers', async () => {
    const first = await b.pk.post('/v1/track', { email: 'a@example.com', event: 'e', data: keys(450, 'f') });
    assert.equal(first.status, 200, first.text);
    const over = await b.pk.post('/v1/track', { email: 'b@example.com', event: 'e', data: keys(60, 'g') });
    assert.equal(over.status, 422, over.text);
    assert.equal(over.body.error.code, 'VALIDATION_ERROR');
    assert.equal(over.body.error.errors[0].field, 'data');
    assert.match(over.body.error.errors[0].message, /at most 500 custom fields: this write would bring it to 510/);
    const none = await b.sk.get('/contacts?search=b%40example.com');
    assert.equal(none.body.data.length, 0, 'the refused write created no contact');
    const post = await b.sk.post('/contacts', { email: 'c@example.com', data: keys(60, 'h') });
    assert.equal(post.status, 422, post.text);
    const contact = (await b.sk.post('/contacts', { email: 'd@example.com' })).body;
    const patch = await b.sk.patch(`/contacts/${contact.id}`, { data: keys(60, 'p') });
    assert.equal(patch.status, 422, patch.text);
    // Existing fields can still be written, and up to the cap new ones too.
    const reuse = await b.pk.post('/v1/track', { email: 'e@example.com', event: 'e', data: { ...keys(450, 'f'), ...keys(50, 'z') } });
    assert.equal(reuse.status, 200, reuse.text);
    const fields = await b.sk.get('/contacts/fields');
    assert.equal(fields.status, 200, fields.text);
    assert.equal(fields.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).length, 500);
  });

  test('at the cap, concurrent tracks (written together) reusing fields succeed and those adding one are 422 and change nothing', async () => {
    // Runs after the test above: the project has its 500 fields.
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        b.pk.post('/v1/track', { email: `together-${i}@example.com`, event: 'e', data: i % 2 === 0 ? { f1: i } : { [`new${i}`]: i } }),
      ),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? 200 : 422)),
    );
    assert.match(results[1].body.error.errors[0].message, /at most 500 custom fields: this write would bring it to 501/);
    const fields = await b.sk.get('/contacts/fields');
    assert.equal(fields.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).length, 500);
    assert.equal((await b.sk.get('/contacts?search=together-1%40example.com')).body.data.length, 0, 'a refused track created no contact');
    const kept = (await b.sk.get('/contacts?search=together-2%40example.com')).body.data;
    assert.deepEqual(
      kept.map((c: { data: Record<string, unknown> }) => c.data.f1),
      [2],
    );
  });

  test('GET /contacts/fields answers for more fields than PostgreSQL allows columns (a project from before the cap)', async () => {
    const p = await bootstrap(server.api, 'many fields');
    await p.sk.post('/contacts', { email: 'x@example.com', data: { k1: 1 } });
    await server.sql(`INSERT INTO contact_fields (project_id, key, type, created_at) SELECT $1, 'k' || i, 'number', now() FROM generate_series(2, 1700) AS i`, [
      p.project.id,
    ]);
    const fields = await p.sk.get('/contacts/fields');
    assert.equal(fields.status, 200, fields.text);
    const custom = fields.body.fields.filter((f: { isCustom: boolean }) => f.isCustom);
    assert.equal(custom.length, 1700);
    assert.equal(custom.find((f: { field: string }) => f.field === 'data.k1').coverage, 1);
    assert.equal(custom.find((f: { field: string }) => f.field === 'data.k2').coverage, 0);
  });
});

describe('what the public key may change', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api, 'public key');
  });
  const subscribedOf = async (email: string) => (await b.sk.get(`/contacts?search=${encodeURIComponent(email)}`)).body.data[0].subscribed;

  test('pk_ never re-subscribes a contact who unsubscribed, but still records the event', async () => {
    const created = await b.sk.post('/contacts', { email: 'optout@example.com', subscribed: false });
    assert.equal(created.status, 201, created.text);
    const res = await b.pk.post('/v1/track', { email: 'optout@example.com', event: 'visit', subscribed: true, data: { plan: 'pro' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(await subscribedOf('optout@example.com'), false);
    const events = await b.sk.get(`/events/contact/${created.body.id}`);
    assert.ok(JSON.stringify(events.body).includes('visit'), 'the event was recorded');
  });

  test('pk_ may subscribe a new contact and may unsubscribe; the secret key may re-subscribe', async () => {
    await b.pk.post('/v1/track', { email: 'new@example.com', event: 'signup', subscribed: true });
    assert.equal(await subscribedOf('new@example.com'), true);
    await b.pk.post('/v1/track', { email: 'new@example.com', event: 'optout', subscribed: false });
    assert.equal(await subscribedOf('new@example.com'), false);
    const sk = await b.sk.post('/events/track', { email: 'new@example.com', event: 'resubscribe', subscribed: true });
    assert.equal(sk.status, 200, sk.text);
    assert.equal(await subscribedOf('new@example.com'), true);
  });
});
