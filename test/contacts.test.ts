import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { customFieldTypes } from '../src/modules/contacts/fields.ts';
import { findContactByEmail, getContact, setSubscribed, upsertContact } from '../src/modules/contacts/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { whileAnotherTransaction } from './helpers/other-transaction.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function eventsOf(contactId: string) {
  return server.sql<{ name: string; data: Record<string, unknown> | null }>('SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at, id', [
    contactId,
  ]);
}

describe('POST /contacts (upsert)', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
  });

  test('creates a contact: 201, normalised email, subscribed by default, _meta isNew', async () => {
    const res = await b.sk.post('/contacts', { email: '  Ada.Lovelace@Example.COM ', data: { plan: 'pro' } });
    assert.equal(res.status, 201);
    assert.match(res.body.id, /^cnt_[0-9a-f]{32}$/);
    assert.equal(res.body.email, 'ada.lovelace@example.com');
    assert.equal(res.body.subscribed, true);
    assert.equal(res.body.snoozedUntil, null);
    assert.deepEqual(res.body.data, { plan: 'pro' });
    assert.match(res.body.createdAt, ISO);
    assert.equal(res.body.updatedAt, res.body.createdAt);
    assert.deepEqual(res.body._meta, { isNew: true, isUpdate: false });
    assert.deepEqual(await eventsOf(res.body.id), [], 'creating a contact emits no subscription event');
  });

  test('upserting the same email (any case) updates the same contact: 200, isUpdate only when something changed', async () => {
    const first = await b.sk.post('/contacts', { email: 'grace@example.com', data: { plan: 'free', seats: 1 } });
    assert.equal(first.status, 201);

    const changed = await b.sk.post('/contacts', { email: 'GRACE@example.com', data: { plan: 'pro' } });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.id, first.body.id);
    assert.deepEqual(changed.body.data, { plan: 'pro', seats: 1 });
    assert.deepEqual(changed.body._meta, { isNew: false, isUpdate: true });
    assert.ok(changed.body.updatedAt >= first.body.updatedAt);
    assert.equal(changed.body.createdAt, first.body.createdAt);

    const same = await b.sk.post('/contacts', { email: 'grace@example.com', data: { plan: 'pro' } });
    assert.equal(same.status, 200);
    assert.deepEqual(same.body._meta, { isNew: false, isUpdate: false });
    assert.equal(same.body.updatedAt, changed.body.updatedAt, 'a no-op upsert keeps updatedAt');

    const rows = await server.sql('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND email = $2', [b.project.id, 'grace@example.com']);
    assert.equal(rows[0].n, 1);
  });

  test('omitting subscribed keeps the current state of an existing contact', async () => {
    const created = await b.sk.post('/contacts', { email: 'keep@example.com', subscribed: false });
    assert.equal(created.body.subscribed, false);
    const again = await b.sk.post('/contacts', { email: 'keep@example.com', data: { a: 1 } });
    assert.equal(again.body.subscribed, false);
    assert.deepEqual(await eventsOf(created.body.id), [], 'a contact created unsubscribed emits nothing either');
  });

  test('subscription changes emit contact.subscribed / contact.unsubscribed once per change', async () => {
    const c = await b.sk.post('/contacts', { email: 'events@example.com' });
    const off = await b.sk.post('/contacts', { email: 'events@example.com', subscribed: false });
    assert.equal(off.body.subscribed, false);
    assert.deepEqual(off.body._meta, { isNew: false, isUpdate: true });
    await b.sk.post('/contacts', { email: 'events@example.com', subscribed: false });
    const on = await b.sk.patch(`/contacts/${c.body.id}`, { subscribed: true });
    assert.equal(on.status, 200);
    assert.equal(on.body.subscribed, true);
    await b.sk.patch(`/contacts/${c.body.id}`, { subscribed: true });
    assert.deepEqual(
      (await eventsOf(c.body.id)).map((e) => e.name),
      ['contact.unsubscribed', 'contact.subscribed'],
    );
  });

  test('concurrent upserts of one new email create exactly one contact', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => b.sk.post('/contacts', { email: 'race@example.com', data: { [`k${i}`]: i } })));
    assert.ok(results.every((r) => r.status === 200 || r.status === 201));
    assert.equal(results.filter((r) => r.body._meta.isNew).length, 1);
    assert.equal(new Set(results.map((r) => r.body.id)).size, 1);
    const [row] = await server.sql<{ data: Record<string, number> }>('SELECT data FROM contacts WHERE project_id = $1 AND email = $2', [
      b.project.id,
      'race@example.com',
    ]);
    assert.equal(Object.keys(row.data).length, 20, 'no concurrent write lost another one’s key');
  });

  test('an upsert that brings nothing new to a contact another transaction creates meanwhile answers with that contact', async () => {
    const res = await whileAnotherTransaction(server, {
      hold: (other) =>
        other.query(
          `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
           VALUES ('cnt_twin_meanwhile', $1, 'twin@example.com', true, '{"a": 1}', now(), now())`,
          [b.project.id],
        ),
      request: () => b.sk.post('/contacts', { email: 'twin@example.com', data: { a: 1 } }),
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, 'cnt_twin_meanwhile');
    assert.equal(res.body._meta.isNew, false);
    assert.deepEqual(res.body.data, { a: 1 });
  });

  test('concurrent subscription flips record events that alternate and end at the final state', async () => {
    const c = await b.sk.post('/contacts', { email: 'flip@example.com' });
    await Promise.all(Array.from({ length: 30 }, (_, i) => b.sk.post('/contacts', { email: 'flip@example.com', subscribed: i % 2 === 0 })));
    // Events carry the request time, so under contention their timestamps need not follow commit
    // order; the counts must still describe an alternation that starts from `subscribed` and ends
    // at the final state (no change lost, none invented).
    const names = (await eventsOf(c.body.id)).map((e) => e.name);
    const offs = names.filter((n) => n === 'contact.unsubscribed').length;
    const ons = names.filter((n) => n === 'contact.subscribed').length;
    assert.ok(offs >= 1);
    const final = await b.sk.get(`/contacts/${c.body.id}`);
    assert.equal(offs - ons, final.body.subscribed ? 0 : 1, `events: ${names.join(',')}`);
  });
});

describe('custom data rules', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
  });

  test('reserved keys are dropped silently; locale is stored', async () => {
    const res = await b.sk.post('/contacts', {
      email: 'reserved@example.com',
      data: {
        id: 'x',
        svc_id: 'x',
        svc_email: 'x',
        email: 'other@example.com',
        unsubscribeUrl: 'x',
        subscribeUrl: 'x',
        manageUrl: 'x',
        locale: 'fr',
        name: 'Réa',
      },
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.email, 'reserved@example.com');
    assert.deepEqual(res.body.data, { locale: 'fr', name: 'Réa' });
  });

  test('null deletes, empty string is ignored, one-off values are not stored, persistent: true is unwrapped', async () => {
    const created = await b.sk.post('/contacts', {
      email: 'rules@example.com',
      data: { plan: 'pro', city: 'Paris', score: 10 },
    });
    const res = await b.sk.post('/contacts', {
      email: 'rules@example.com',
      data: {
        plan: null,
        city: '',
        coupon: { value: 'SAVE10', persistent: false },
        tier: { value: 'gold', persistent: true },
        missing: null,
      },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, created.body.id);
    assert.deepEqual(res.body.data, { city: 'Paris', score: 10, tier: 'gold' });
    const [row] = await server.sql('SELECT data FROM contacts WHERE id = $1', [created.body.id]);
    assert.deepEqual(row.data, { city: 'Paris', score: 10, tier: 'gold' });
  });

  test('nested objects are stored and replace the previous value of their key', async () => {
    const res = await b.sk.post('/contacts', {
      email: 'nested@example.com',
      data: { profile: { tier: 'gold', address: { city: 'Oslo' } }, tags: ['a', 'b'] },
    });
    assert.deepEqual(res.body.data, { profile: { tier: 'gold', address: { city: 'Oslo' } }, tags: ['a', 'b'] });
    const patched = await b.sk.patch(`/contacts/${res.body.id}`, { data: { profile: { tier: 'silver' } } });
    assert.deepEqual(patched.body.data, { profile: { tier: 'silver' }, tags: ['a', 'b'] });
  });

  test('PATCH changes only the keys sent', async () => {
    const c = await b.sk.post('/contacts', { email: 'patch@example.com', data: { a: 1, b: 2, c: 3 } });
    const res = await b.sk.patch(`/contacts/${c.body.id}`, { data: { b: 20, c: null, d: '' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data, { a: 1, b: 20 });
    assert.equal(res.body.subscribed, true);
    assert.equal(res.body.email, 'patch@example.com');
    assert.equal(res.body._meta, undefined);
    const empty = await b.sk.patch(`/contacts/${c.body.id}`, {});
    assert.equal(empty.status, 200);
    assert.equal(empty.body.updatedAt, res.body.updatedAt, 'an empty PATCH changes nothing');
  });

  test('a field is typed by its first non-null value and the type stays fixed', async () => {
    await b.sk.post('/contacts', {
      email: 'types1@example.com',
      data: {
        age: 31,
        vip: true,
        born: '1990-05-17',
        lastSeen: '2024-03-01T10:20:30.123Z',
        notADate: '2024-02-30',
        usDate: '05/17/1990',
        zip: '0123',
        gone: null,
      },
    });
    await b.sk.post('/contacts', { email: 'types2@example.com', data: { age: 'thirty', vip: 'yes' } });
    const fields = await b.sk.get('/contacts/fields');
    const types = Object.fromEntries(
      fields.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).map((f: { field: string; type: string }) => [f.field, f.type]),
    );
    assert.equal(types['data.age'], 'number');
    assert.equal(types['data.vip'], 'boolean');
    assert.equal(types['data.born'], 'date');
    assert.equal(types['data.lastSeen'], 'date');
    assert.equal(types['data.notADate'], 'string');
    assert.equal(types['data.usDate'], 'string');
    assert.equal(types['data.zip'], 'string');
    assert.equal(types['data.gone'], undefined, 'null never types a field');
    const other = await b.sk.post('/contacts', { email: 'types2@example.com' });
    assert.deepEqual(other.body.data, { age: 'thirty', vip: 'yes' }, 'values of another type are stored as sent');
  });
});

describe('GET, PATCH, DELETE /contacts/:id', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
  });

  test('GET returns the contact without _meta', async () => {
    const c = await b.sk.post('/contacts', { email: 'get@example.com', data: { x: 1 } });
    const res = await b.sk.get(`/contacts/${c.body.id}`);
    assert.equal(res.status, 200);
    const { _meta, ...expected } = c.body;
    assert.deepEqual(_meta, { isNew: true, isUpdate: false });
    assert.deepEqual(res.body, expected);
  });

  test('PATCH changes the email (normalised); the old address is free again', async () => {
    const c = await b.sk.post('/contacts', { email: 'old@example.com' });
    const res = await b.sk.patch(`/contacts/${c.body.id}`, { email: ' New@Example.com' });
    assert.equal(res.status, 200);
    assert.equal(res.body.email, 'new@example.com');
    const lookup = await b.sk.post('/contacts/lookup', { emails: ['old@example.com', 'new@example.com'] });
    assert.deepEqual(lookup.body, { found: [{ id: c.body.id, email: 'new@example.com' }], notFound: ['old@example.com'] });
    const same = await b.sk.patch(`/contacts/${c.body.id}`, { email: 'NEW@example.com' });
    assert.equal(same.status, 200, 'its own email in another case is not a conflict');
  });

  test('PATCH and POST that bring nothing new answer with the contact and leave its row as it was; a change writes it', async () => {
    const c = await b.sk.post('/contacts', { email: 'same@example.com', subscribed: true, data: { tier: 'gold' } });
    const row = async () => (await server.sql<{ xmin: string }>(`SELECT xmin::text FROM contacts WHERE id = $1`, [c.body.id]))[0].xmin;
    const before = await row();
    const { _meta, ...expected } = c.body;
    const patched = await b.sk.patch(`/contacts/${c.body.id}`, { email: 'SAME@example.com', subscribed: true, data: { tier: 'gold' } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.body, expected);
    const posted = await b.sk.post('/contacts', { email: 'same@example.com', data: { tier: 'gold' } });
    assert.equal(posted.status, 200, posted.text);
    assert.deepEqual(posted.body, { ...expected, _meta: { isNew: false, isUpdate: false } });
    assert.equal(await row(), before);
    assert.equal((await eventsOf(c.body.id)).length, 0);
    const changed = await b.sk.patch(`/contacts/${c.body.id}`, { subscribed: false });
    assert.equal(changed.body.subscribed, false);
    assert.notEqual(await row(), before);
    assert.deepEqual(
      (await eventsOf(c.body.id)).map((e) => e.name),
      ['contact.unsubscribed'],
    );
  });

  test('DELETE is 204 with an empty body, permanent, and takes the contact’s events with it', async () => {
    const c = await b.sk.post('/contacts', { email: 'delete@example.com' });
    await b.sk.patch(`/contacts/${c.body.id}`, { subscribed: false });
    assert.equal((await eventsOf(c.body.id)).length, 1);
    const res = await b.sk.delete(`/contacts/${c.body.id}`);
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    const gone = await b.sk.get(`/contacts/${c.body.id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'CONTACT_NOT_FOUND');
    assert.deepEqual(gone.body.error.details, { resource: 'contact', id: c.body.id });
    assert.equal((await eventsOf(c.body.id)).length, 0);
    const again = await b.sk.delete(`/contacts/${c.body.id}`);
    assert.equal(again.status, 404);
    const recreated = await b.sk.post('/contacts', { email: 'delete@example.com' });
    assert.equal(recreated.status, 201);
    assert.notEqual(recreated.body.id, c.body.id);
  });
});

describe('POST /contacts/lookup', () => {
  test('reports found and missing emails, case-insensitively, each once, in input order', async () => {
    const b = await bootstrap(server.api);
    const a = await b.sk.post('/contacts', { email: 'a@example.com' });
    const c = await b.sk.post('/contacts', { email: 'c@example.com' });
    const res = await b.sk.post('/contacts/lookup', {
      emails: ['C@example.com', 'b@example.com', 'a@example.com', ' A@EXAMPLE.COM', 'b@example.com'],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      found: [
        { id: c.body.id, email: 'c@example.com' },
        { id: a.body.id, email: 'a@example.com' },
      ],
      notFound: ['b@example.com'],
    });
  });

  test('500 emails are accepted', async () => {
    const b = await bootstrap(server.api);
    const emails = Array.from({ length: 500 }, (_, i) => `u${i}@example.com`);
    const res = await b.sk.post('/contacts/lookup', { emails });
    assert.equal(res.status, 200);
    assert.equal(res.body.found.length, 0);
    assert.equal(res.body.notFound.length, 500);
  });
});

describe('exported service functions', () => {
  test('upsertContact reports one-off values and records field types; findContactByEmail ignores case', async () => {
    const b = await bootstrap(server.api);
    const db = server.ctx.database.db;
    const now = new Date('2025-01-02T03:04:05.678Z');
    const created = await upsertContact(
      db,
      b.project.id,
      { email: 'Svc@Example.com', data: { plan: 'pro', coupon: { value: 'X1', persistent: false } } },
      { defaultSubscribed: false, now },
    );
    assert.equal(created.isNew, true);
    assert.equal(created.isUpdate, false);
    assert.equal(created.contact.subscribed, false);
    assert.equal(created.contact.createdAt, '2025-01-02T03:04:05.678Z');
    assert.deepEqual(created.contact.data, { plan: 'pro' });
    assert.deepEqual(created.oneOff, { coupon: 'X1' });
    const found = await findContactByEmail(db, b.project.id, ' SVC@example.COM ');
    assert.equal(found?.id, created.contact.id);
    assert.equal(await findContactByEmail(db, b.project.id, 'nobody@example.com'), null);
    assert.deepEqual(await customFieldTypes(db, b.project.id), new Map([['plan', 'string']]));
  });

  test('setSubscribed emits only on a change, with the given event data', async () => {
    const b = await bootstrap(server.api);
    const db = server.ctx.database.db;
    const c = await b.sk.post('/contacts', { email: 'bounce@example.com' });
    const off = await setSubscribed(db, b.project.id, c.body.id, false, { reason: 'bounce' });
    assert.equal(off?.subscribed, false);
    const again = await setSubscribed(db, b.project.id, c.body.id, false, { reason: 'bounce' });
    assert.equal(again, null, 'already unsubscribed: nothing changed');
    assert.deepEqual(await eventsOf(c.body.id), [{ name: 'contact.unsubscribed', data: { reason: 'bounce' } }]);
    assert.equal(await setSubscribed(db, b.project.id, 'cnt_00000000000000000000000000000000', true), null);
    const other = await bootstrap(server.api);
    assert.equal(await setSubscribed(db, other.project.id, c.body.id, true), null, 'another project cannot touch it');
    await assert.rejects(getContact(db, other.project.id, c.body.id), { code: 'CONTACT_NOT_FOUND', statusCode: 404 });
  });

  test('upsertContact rejects an invalid email with a validation error', async () => {
    const b = await bootstrap(server.api);
    await assert.rejects(upsertContact(server.ctx.database.db, b.project.id, { email: 'not-an-email' }, { defaultSubscribed: true }), {
      statusCode: 422,
      code: 'VALIDATION_ERROR',
    });
  });
});
