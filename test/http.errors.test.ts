import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

// One error format for the mistakes a newcomer with curl makes first.

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer({ SNS_TOPIC_ARNS: 'arn:aws:sns:us-east-1:123456789012:herald-test' });
  b = await bootstrap(server.api);
});
after(() => server?.stop());

const countContacts = async () => (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts'))[0].n;

describe('a body that is not JSON on a JSON route', () => {
  for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'text/plain; charset=utf-8']) {
    test(`${type} is 415 in the full error shape, and nothing is created`, async () => {
      const before = await countContacts();
      const res = await b.sk.request('POST', '/contacts', { raw: '{"email":"ada@example.com"}', headers: { 'content-type': type } });
      assert.equal(res.status, 415, res.text);
      assert.equal(res.body.success, false);
      assert.equal(res.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(res.body.error.statusCode, 415);
      assert.equal(
        res.body.error.message,
        `Content-Type ${type.split(';')[0]} is not accepted here: send the body as JSON with content-type: application/json`,
      );
      assert.match(res.body.error.requestId, /\S/);
      assert.equal(await countContacts(), before);
    });
  }

  test('authentication still comes first', async () => {
    const res = await server.api.request('POST', '/contacts', { raw: 'email=a@b.co', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(res.status, 401, res.text);
  });

  test('routes that take forms and files still do', async () => {
    const sns = await server.api.request('POST', '/webhooks/notifications', { raw: '{nope', headers: { 'content-type': 'text/plain' } });
    assert.equal(sns.status, 400);
    assert.equal(sns.body.error.code, 'INVALID_JSON');
    const form = new FormData();
    form.set('file', new Blob(['email\nada@example.com\n'], { type: 'text/csv' }), 'c.csv');
    const imported = await b.sk.request('POST', '/contacts/import', { raw: form });
    assert.equal(imported.status, 202, imported.text);
  });
});

describe('malformed JSON', () => {
  test('says where it broke', async () => {
    const res = await b.sk.request('POST', '/contacts', { raw: '{\n  "email": "ada@example.com",\n}', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_JSON');
    assert.equal(res.body.error.message, 'Request body is not valid JSON at line 3, column 1: Expected double-quoted property name');
    assert.deepEqual(res.body.error.details, { position: 32, line: 3, column: 1 });
  });

  test('a body cut short says so', async () => {
    const res = await b.sk.request('POST', '/contacts', { raw: '{"email": "x@', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.match(res.body.error.message, /^Request body is not valid JSON( at line 1, column \d+: .+|: it ends too early)$/);
  });

  test('prototype keys are still refused', async () => {
    const res = await b.sk.request('POST', '/contacts', {
      raw: '{"email":"p@example.com","__proto__":{"x":1}}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_JSON');
  });
});

describe('wrong method on a known path', () => {
  test('is 405 with Allow', async () => {
    const res = await b.sk.request('PUT', '/contacts');
    assert.equal(res.status, 405, res.text);
    assert.equal(res.headers.get('allow'), 'GET, HEAD, POST');
    assert.equal(res.body.error.code, 'METHOD_NOT_ALLOWED');
    assert.equal(res.body.error.message, 'Method PUT is not allowed on /contacts; use GET, HEAD, POST');
  });

  test('with a path parameter', async () => {
    const res = await b.sk.request('POST', '/contacts/cnt_123');
    assert.equal(res.status, 405, res.text);
    assert.match(res.headers.get('allow') ?? '', /GET/);
  });

  test('an unknown path is still 404', async () => {
    const res = await b.sk.get('/nothing-here');
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'RESOURCE_NOT_FOUND');
  });
});
