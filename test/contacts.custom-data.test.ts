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
