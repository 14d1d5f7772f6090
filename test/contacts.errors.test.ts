import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
let b: Bootstrapped;
let other: Bootstrapped;
let alice: { id: string; email: string };
let bob: { id: string; email: string };
let foreign: { id: string };
let snapshot: string;

/** Everything the bad requests below could have touched. */
async function state(): Promise<string> {
  const rows = await Promise.all([
    server.sql('SELECT * FROM contacts ORDER BY id'),
    server.sql('SELECT * FROM contact_fields ORDER BY project_id, key'),
    server.sql('SELECT * FROM events ORDER BY id'),
  ]);
  return JSON.stringify(rows);
}

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
  other = await bootstrap(server.api);
  alice = (await b.sk.post('/contacts', { email: 'alice@example.com', data: { plan: 'pro' } })).body;
  bob = (await b.sk.post('/contacts', { email: 'bob@example.com', subscribed: true })).body;
  foreign = (await other.sk.post('/contacts', { email: 'foreign@example.com', data: { secret: 1 } })).body;
  snapshot = await state();
});
after(async () => {
  // None of the bad requests may have changed stored data.
  if (server) assert.equal(await state(), snapshot);
  await server?.stop();
});

function assertValidation(res: Res, field: string, code: string, received?: string) {
  assert.equal(res.status, 422, res.text);
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, 'VALIDATION_ERROR');
  assert.equal(res.body.error.message, 'Request validation failed');
  const item = res.body.error.errors.find((e: { field: string }) => e.field === field);
  assert.ok(item, `an error for ${field}: ${res.text}`);
  assert.equal(item.code, code);
  if (received !== undefined) assert.equal(item.received, received);
}

describe('POST /contacts: bad input', () => {
  test('a missing email is the simple 400 body', async () => {
    for (const body of [{ data: { a: 1 } }, {}, undefined, [], 'alice@example.com']) {
      const res = await b.sk.post('/contacts', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, { error: 'email is required' });
    }
  });

  test('a present but invalid email is 422 with invalid_string / invalid_type', async () => {
    assertValidation(await b.sk.post('/contacts', { email: 'not-an-email' }), 'email', 'invalid_string');
    assertValidation(await b.sk.post('/contacts', { email: '' }), 'email', 'invalid_string');
    assertValidation(await b.sk.post('/contacts', { email: 42 }), 'email', 'invalid_type', 'number');
    assertValidation(await b.sk.post('/contacts', { email: null }), 'email', 'invalid_type', 'null');
    assertValidation(await b.sk.post('/contacts', { email: ['a@b.co'] }), 'email', 'invalid_type', 'array');
  });

  test('an email over 254 characters is 422 too_big', async () => {
    const long = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(60)}.com`;
    assert.equal(long.length, 257);
    assertValidation(await b.sk.post('/contacts', { email: long }), 'email', 'too_big');
  });

  test('data that is not an object is 422 invalid_type', async () => {
    assertValidation(await b.sk.post('/contacts', { email: 'new@example.com', data: [1, 2] }), 'data', 'invalid_type', 'array');
    assertValidation(await b.sk.post('/contacts', { email: 'new@example.com', data: 'plan=pro' }), 'data', 'invalid_type', 'string');
    assertValidation(await b.sk.post('/contacts', { email: 'new@example.com', data: null }), 'data', 'invalid_type', 'null');
  });

  test('a non-string locale, a non-boolean subscribed and unknown keys are 422', async () => {
    assertValidation(await b.sk.post('/contacts', { email: 'new@example.com', data: { locale: 5 } }), 'data.locale', 'invalid_type', 'number');
    assertValidation(await b.sk.post('/contacts', { email: 'new@example.com', subscribed: 'yes' }), 'subscribed', 'invalid_type', 'string');
    const unknown = await b.sk.post('/contacts', { email: 'new@example.com', firstName: 'Ada' });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.error.errors[0].code, 'unrecognized_keys');
  });

  test('text PostgreSQL cannot store (NUL, unpaired surrogates) is 422, not 500', async () => {
    for (const raw of [
      '{"email":"nul@example.com","data":{"x":"a\\u0000b"}}',
      '{"email":"nul@example.com","data":{"a\\u0000":1}}',
      '{"email":"nul@example.com","data":{"x":{"deep":["\\ud800"]}}}',
    ]) {
      const res = await b.sk.request('POST', '/contacts', { raw, headers: { 'content-type': 'application/json' } });
      assertValidation(res, 'data', 'custom');
    }
    assertValidation(await b.sk.get('/contacts?search=%00'), 'search', 'custom');
    assertValidation(await b.sk.get('/contacts/fields/data.a%00/values'), 'field', 'custom');
    const cursor = Buffer.from(JSON.stringify(['a\u0000', alice.id])).toString('base64url');
    const res = await b.sk.get(`/contacts?sort=email&cursor=${cursor}`);
    assert.equal(res.status, 400);
  });

  test('malformed JSON is 400 INVALID_JSON; a 10 MB body is 413', async () => {
    const bad = await b.sk.request('POST', '/contacts', { raw: '{"email": "x@', headers: { 'content-type': 'application/json' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'INVALID_JSON');
    const huge = JSON.stringify({ email: 'huge@example.com', data: { blob: 'x'.repeat(10 * 1024 * 1024) } });
    const res = await b.sk.request('POST', '/contacts', { raw: huge, headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
  });
});

describe('GET /contacts: bad query', () => {
  test('limit=0 and limit=abc are 422; limit=1000 is clamped', async () => {
    assertValidation(await b.sk.get('/contacts?limit=0'), 'limit', 'too_small');
    assertValidation(await b.sk.get('/contacts?limit=abc'), 'limit', 'invalid_type');
    assertValidation(await b.sk.get('/contacts?limit=-5'), 'limit', 'too_small');
    const clamped = await b.sk.get('/contacts?limit=1000');
    assert.equal(clamped.status, 200);
    assert.equal(clamped.body.data.length, 2);
  });

  test('unknown or tampered cursors are 400, never 500', async () => {
    const tampered = [
      'not-a-cursor',
      '%%%',
      Buffer.from('{"a":1}').toString('base64url'),
      Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000000Z', "x'; DROP TABLE contacts; --"])).toString('base64url'),
      Buffer.from(JSON.stringify(["'; DROP TABLE contacts; --", alice.id])).toString('base64url'),
      Buffer.from(JSON.stringify(['2024-13-45T99:99:99.000000Z', alice.id])).toString('base64url'),
      Buffer.from(JSON.stringify([12345, alice.id])).toString('base64url'),
      Buffer.from(JSON.stringify(['x'.repeat(300), alice.id])).toString('base64url'),
    ];
    for (const cursor of tampered) {
      const res = await b.sk.get(`/contacts?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(res.status, 400, `${cursor}: ${res.text}`);
      assert.equal(res.body.error.code, 'BAD_REQUEST');
    }
    const emailSorted = await b.sk.get(`/contacts?sort=email&cursor=${encodeURIComponent(tampered[4])}`);
    assert.equal(emailSorted.status, 200, 'any string is a position in email order');
    const tooLong = await b.sk.get(`/contacts?cursor=${'A'.repeat(3000)}`);
    assert.equal(tooLong.status, 422);
  });

  test('sort=drop table falls back to createdAt; subscribed=maybe is 422', async () => {
    const res = await b.sk.get(`/contacts?sort=${encodeURIComponent('drop table contacts')}&dir=${encodeURIComponent("'")}`);
    assert.equal(res.status, 200);
    const byDefault = await b.sk.get('/contacts');
    assert.deepEqual(res.body, byDefault.body);
    assert.deepEqual(new Set(res.body.data.map((c: { id: string }) => c.id)), new Set([alice.id, bob.id]));
    assertValidation(await b.sk.get('/contacts?subscribed=maybe'), 'subscribed', 'invalid_enum_value');
  });
});

describe('contact ids, other projects, conflicts', () => {
  test('an id of the wrong shape is 404 CONTACT_NOT_FOUND on GET, PATCH and DELETE', async () => {
    for (const id of ['123', 'cnt_xyz', "cnt_' OR 1=1 --", 'prj_00000000000000000000000000000000', 'a'.repeat(90)]) {
      const path = `/contacts/${encodeURIComponent(id)}`;
      for (const res of [await b.sk.get(path), await b.sk.patch(path, { data: { x: 1 } }), await b.sk.delete(path)]) {
        assert.equal(res.status, 404, `${id}: ${res.text}`);
        assert.equal(res.body.error.code, 'CONTACT_NOT_FOUND');
        assert.deepEqual(res.body.error.details, { resource: 'contact', id });
      }
    }
  });

  test('another project’s contact is 404 on GET, PATCH and DELETE, and invisible in lists and lookups', async () => {
    const path = `/contacts/${foreign.id}`;
    for (const res of [
      await b.sk.get(path),
      await b.sk.patch(path, { email: 'stolen@example.com', subscribed: false, data: { secret: 2, injected: true } }),
      await b.sk.delete(path),
    ]) {
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'CONTACT_NOT_FOUND');
      assert.ok(!res.text.includes('foreign@example.com'));
    }
    const lookup = await b.sk.post('/contacts/lookup', { emails: ['foreign@example.com'] });
    assert.deepEqual(lookup.body, { found: [], notFound: ['foreign@example.com'] });
    const list = await b.sk.get('/contacts?search=foreign');
    assert.deepEqual(list.body.data, []);
    const fields = await b.sk.get('/contacts/fields');
    assert.ok(!fields.body.fields.some((f: { field: string }) => f.field === 'data.secret'));
    const values = await b.sk.get('/contacts/fields/data.secret/values');
    assert.deepEqual(values.body.values, []);
  });

  test('changing the email to one another contact uses is 409 and changes nothing', async () => {
    const res = await b.sk.patch(`/contacts/${alice.id}`, { email: 'BOB@example.com', subscribed: false, data: { plan: 'free', x: 1 } });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'CONFLICT');
    const after = await b.sk.get(`/contacts/${alice.id}`);
    assert.equal(after.body.email, 'alice@example.com');
    assert.equal(after.body.subscribed, true);
    assert.deepEqual(after.body.data, { plan: 'pro' });
  });

  test('PATCH validation: invalid email, non-object data, unknown keys', async () => {
    const path = `/contacts/${alice.id}`;
    assertValidation(await b.sk.patch(path, { email: 'nope' }), 'email', 'invalid_string');
    assertValidation(await b.sk.patch(path, { email: 7 }), 'email', 'invalid_type', 'number');
    assertValidation(await b.sk.patch(path, { data: [1] }), 'data', 'invalid_type', 'array');
    assertValidation(await b.sk.patch(path, { subscribed: null }), 'subscribed', 'invalid_type', 'null');
    const unknown = await b.sk.patch(path, { id: 'cnt_other' });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.error.errors[0].code, 'unrecognized_keys');
  });
});

describe('lookup and fields: bad input', () => {
  test('501 emails, no emails, a bad email or a non-array are 422', async () => {
    const many = Array.from({ length: 501 }, (_, i) => `u${i}@example.com`);
    assertValidation(await b.sk.post('/contacts/lookup', { emails: many }), 'emails', 'too_big');
    assertValidation(await b.sk.post('/contacts/lookup', { emails: [] }), 'emails', 'too_small');
    assertValidation(await b.sk.post('/contacts/lookup', { emails: ['a@example.com', 'nope'] }), 'emails.1', 'invalid_string');
    assertValidation(await b.sk.post('/contacts/lookup', { emails: 'a@example.com' }), 'emails', 'invalid_type', 'string');
    assertValidation(await b.sk.post('/contacts/lookup', {}), 'emails', 'invalid_type', 'undefined');
  });

  test('bad field names are 400; bad values limits 422', async () => {
    for (const field of ['data.', 'data..x', 'a..b']) {
      const res = await b.sk.get(`/contacts/fields/${encodeURIComponent(field)}/values`);
      assert.equal(res.status, 400, field);
      assert.equal(res.body.error.code, 'BAD_REQUEST');
    }
    assertValidation(await b.sk.get('/contacts/fields/data.plan/values?limit=0'), 'limit', 'too_small');
    assertValidation(await b.sk.get('/contacts/fields/data.plan/values?limit=x'), 'limit', 'invalid_type');
    const clamped = await b.sk.get('/contacts/fields/data.plan/values?limit=100000');
    assert.equal(clamped.status, 200);
    const injected = await b.sk.get(`/contacts/fields/${encodeURIComponent("data.x'}; DROP TABLE contacts; --")}/values`);
    assert.equal(injected.status, 200);
    assert.deepEqual(injected.body.values, []);
  });
});
