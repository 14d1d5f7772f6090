import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { fieldTypesOf, inferFieldType, mergeCustomData } from '../src/modules/contacts/custom-data.ts';
import { upsertContact } from '../src/modules/contacts/service.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

describe('inferFieldType', () => {
  test('numbers, booleans, dates and strings', () => {
    assert.equal(inferFieldType(3), 'number');
    assert.equal(inferFieldType(-0.5), 'number');
    assert.equal(inferFieldType(false), 'boolean');
    assert.equal(inferFieldType('2024-02-29'), 'date');
    assert.equal(inferFieldType('2024-02-29T23:59:59Z'), 'date');
    assert.equal(inferFieldType('2024-02-29T23:59:59.123Z'), 'date');
    assert.equal(inferFieldType('2023-02-29'), 'string', 'not a calendar day');
    assert.equal(inferFieldType('2024-02-29T24:00:00Z'), 'string');
    assert.equal(inferFieldType('2024-02-29T10:00:00+02:00'), 'string', 'only the Z form is a date');
    assert.equal(inferFieldType('2024-2-9'), 'string');
    assert.equal(inferFieldType('42'), 'string', 'a numeric string stays a string');
    assert.equal(inferFieldType('true'), 'string');
    assert.equal(inferFieldType(''), 'string');
  });

  test('null, objects and arrays are never typed', () => {
    assert.equal(inferFieldType(null), null);
    assert.equal(inferFieldType(undefined), null);
    assert.equal(inferFieldType({ a: 1 }), null);
    assert.equal(inferFieldType([1]), null);
  });
});

describe('mergeCustomData', () => {
  test('applies every rule of the Custom fields table', () => {
    const current = { plan: 'pro', city: 'Paris', old: 1 };
    const result = mergeCustomData(current, {
      plan: 'team',
      city: '',
      old: null,
      coupon: { value: 'X', persistent: false },
      tier: { value: 'gold', persistent: true },
      profile: { a: { b: 1 } },
      id: 'cnt_x',
      email: 'x@example.com',
      svc_id: 1,
      svc_email: 1,
      unsubscribeUrl: 'u',
      subscribeUrl: 'u',
      manageUrl: 'u',
      '': 'empty key',
      locale: 'de',
    });
    assert.deepEqual(result.data, { plan: 'team', city: 'Paris', tier: 'gold', profile: { a: { b: 1 } }, locale: 'de' });
    assert.deepEqual(result.oneOff, { coupon: 'X' });
    assert.equal(result.changed, true);
    assert.deepEqual(current, { plan: 'pro', city: 'Paris', old: 1 }, 'pure: the input is not modified');
  });

  test('changed is false when nothing changes (key order does not matter)', () => {
    const current = { a: 1, b: { x: 1, y: 2 } };
    assert.equal(mergeCustomData(current, undefined).changed, false);
    assert.equal(mergeCustomData(current, { b: { y: 2, x: 1 }, c: '', d: null }).changed, false);
    assert.equal(mergeCustomData(current, { a: '1' }).changed, true);
  });

  test('__proto__ never reaches a prototype', () => {
    const incoming = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}');
    const { data } = mergeCustomData({}, incoming);
    assert.deepEqual(data, { ok: 1 });
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('fieldTypesOf types primitive leaves, nested ones with dotted keys, sorted', () => {
    assert.deepEqual(fieldTypesOf({ z: 1, a: { b: '2024-01-01', c: [1], d: { e: true } }, n: null }), {
      keys: ['a.b', 'a.d.e', 'z'],
      types: ['date', 'boolean', 'number'],
    });
  });
});

describe('the SQL merge and mergeCustomData agree', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => server?.stop());

  const key = fc.constantFrom('a', 'b', 'c', 'email', 'id', 'locale', 'nested');
  const primitive = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean(), fc.constant(''), fc.constant(null));
  const value = fc.oneof(
    primitive,
    fc.record({ value: primitive, persistent: fc.boolean() }),
    fc.dictionary(fc.constantFrom('x', 'y'), fc.oneof(fc.integer(), fc.string({ maxLength: 2 }))),
  );
  const data = fc.dictionary(key, value, { maxKeys: 5 });

  test('for generated sequences of upserts, stored data equals the pure merge', async () => {
    const b = await bootstrap(server.api);
    const db = server.ctx.database.db;
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(data, { minLength: 1, maxLength: 4 }), async (updates) => {
        const email = `prop${n++}@example.com`;
        let expected: Record<string, unknown> = {};
        for (const generated of updates) {
          const update = JSON.parse(JSON.stringify(generated)) as Record<string, unknown>; // as it arrives over HTTP
          const merged = mergeCustomData(expected, update);
          const result = await upsertContact(db, b.project.id, { email, data: update }, { defaultSubscribed: true });
          assert.deepEqual(result.contact.data, merged.data);
          assert.deepEqual(result.oneOff, merged.oneOff);
          if (!result.isNew) assert.equal(result.isUpdate, merged.changed);
          expected = merged.data;
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('a data key with a dot is refused wherever contact data is written', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => server?.stop());

  test('send, track, POST /contacts and PATCH /contacts/:id answer 422 naming the key, and change nothing', async () => {
    const b = await bootstrap(server.api);
    const created = await b.sk.post('/contacts', { email: 'kept@example.com', data: { plan: 'pro' } });
    assert.equal(created.status, 201, created.text);
    const writes = [
      () => b.sk.post('/contacts', { email: 'r@example.com', data: { 'a.b': 1 } }),
      () => b.sk.patch(`/contacts/${created.body.id}`, { data: { 'a.b': 1 } }),
      () => b.pk.post('/v1/track', { email: 'r@example.com', event: 'signed_up', data: { 'a.b': 1 } }),
      () => b.sk.post('/v1/send', { to: 'r@example.com', from: 'a@sandbox.herald.test', subject: 's', body: 'b', data: { 'a.b': 1 } }),
    ];
    for (const write of writes) {
      const res = await write();
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.deepEqual(
        res.body.error.errors.map((e: { field: string; message: string }) => [e.field, e.message]),
        [['data.a.b', "data key 'a.b' must not contain '.': nested values are reached as data.a.b, so a key with a dot is ambiguous; nest an object instead"]],
      );
    }
    // Inside a nested object and a one-off value too; not inside a list.
    const nested = await b.pk.post('/v1/track', { email: 'r@example.com', event: 'e', data: { profile: { 'x.y': 1 } } });
    assert.equal(nested.status, 422, nested.text);
    assert.equal(nested.body.error.errors[0].field, 'data.profile.x.y');
    const oneOff = await b.sk.post('/contacts', { email: 'r@example.com', data: { v: { value: { 'x.y': 1 }, persistent: false } } });
    assert.equal(oneOff.status, 422, oneOff.text);
    assert.equal((await b.sk.get('/contacts?search=r@example.com')).body.data.length, 0);
    assert.deepEqual((await b.sk.get(`/contacts/${created.body.id}`)).body.data, { plan: 'pro' });
    const fields = (await b.sk.get('/contacts/fields')).body.fields.map((f: { field: string }) => f.field);
    assert.deepEqual(
      fields.filter((f: string) => f.startsWith('data.')),
      ['data.plan'],
    );

    const listed = await b.sk.post('/contacts', { email: 'list@example.com', data: { items: [{ 'x.y': 1 }] } });
    assert.equal(listed.status, 201, listed.text);
    // A key stored before the rule can still be deleted by sending it as null.
    await server.sql(`UPDATE contacts SET data = data || '{"a.b": 1}'::jsonb WHERE id = $1`, [created.body.id]);
    const cleared = await b.sk.patch(`/contacts/${created.body.id}`, { data: { 'a.b': null } });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual(cleared.body.data, { plan: 'pro' });
  });
});
