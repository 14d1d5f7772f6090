import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { loggableError } from '../src/loggable-error.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** Issue 14 finding 8: bad input is a 4xx in the error shape, never a 500; the 500 log holds no parameters. */

let server: TestServer;
let b: Bootstrapped;
let segmentId: string;

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
  const seg = await b.sk.post('/segments', { name: 'static', type: 'STATIC' });
  assert.equal(seg.status, 201, seg.text);
  segmentId = seg.body.id;
});
after(async () => {
  await server?.stop();
});

function assertClientError(res: Res, what: string) {
  assert.ok(res.status >= 400 && res.status < 500, `${what}: ${res.status} ${res.text}`);
  if (typeof res.body === 'object' && res.body && 'success' in res.body) {
    assert.equal(res.body.success, false, what);
    assert.equal(typeof res.body.error.code, 'string', what);
    assert.equal(res.body.error.statusCode, res.status, what);
    assert.equal(typeof res.body.error.requestId, 'string', what);
  } else {
    assert.equal(typeof res.body?.error, 'string', `${what}: an error body`);
  }
}

const NUL = 'a\u0000b';
const cursorAt = (date: string) => Buffer.from(JSON.stringify([date, '00000000-0000-4000-8000-000000000000'])).toString('base64url');

describe('inputs that used to answer 500', () => {
  test('NUL characters in auth, templates, campaigns and /v1/send fields', async () => {
    const api = server.api;
    assertClientError(await api.post('/auth/login', { email: `x${NUL}@example.com`, password: 'whatever pass' }), 'login email');
    assertClientError(await api.post('/auth/request-password-reset', { email: `x${NUL}@example.com` }), 'reset email');
    assertClientError(await b.sk.post('/templates', { name: NUL, subject: 's', body: 'b', from: 'a@example.com' }), 'template name');
    assertClientError(await b.sk.post('/templates', { name: 'n', subject: NUL, body: 'b', from: 'a@example.com' }), 'template subject');
    assertClientError(await b.sk.post('/campaigns', { name: NUL, subject: 's' }), 'campaign name');
    assertClientError(await b.sk.post('/campaigns', { name: 'c', subject: NUL }), 'campaign subject');
    const send = { to: 'r@example.com', from: 'a@example.com', subject: 's', body: 'b' };
    assertClientError(await b.sk.post('/v1/send', { ...send, subject: NUL }), 'send subject');
    assertClientError(await b.sk.post('/v1/send', { ...send, body: NUL }), 'send body');
    assertClientError(await b.sk.post('/v1/send', { ...send, headers: { 'X-A': NUL } }), 'send header');
    assertClientError(await b.sk.post('/v1/send', { ...send, to: { email: 'r@example.com', name: NUL } }), 'send to.name');
    assertClientError(await b.sk.post('/v1/send', { ...send, attachments: [{ filename: NUL, content: 'aGk=' }] }), 'attachment filename');
    assertClientError(await b.sk.post('/v1/send', { ...send, data: { k: NUL } }), 'send data');
  });

  test('NUL characters in searches, ids and path parameters', async () => {
    for (const path of ['/templates', '/campaigns', '/suppressions']) {
      assertClientError(await b.sk.get(`${path}?search=a%00b`), `${path} search`);
    }
    assertClientError(await b.sk.get('/emails?contactId=a%00b'), '/emails contactId');
    assertClientError(await b.sk.delete('/suppressions/a%00b'), 'DELETE /suppressions');
  });

  test('numbers and dates out of range', async () => {
    assertClientError(await b.sk.get('/templates?page=1e20'), 'templates page');
    assertClientError(await b.sk.get('/campaigns?page=1e20'), 'campaigns page');
    assertClientError(await b.sk.get(`/segments/${segmentId}/contacts?page=1e20`), 'segment members page');
    assertClientError(await b.sk.get(`/emails?cursor=${cursorAt('0000-01-01T00:00:00.000Z')}`), 'emails cursor year 0');
    assertClientError(await b.sk.get(`/emails?cursor=${cursorAt('+275760-09-13T00:00:00.000Z')}`), 'emails cursor year 275760');
    assertClientError(await b.sk.get('/events/stats?from=0000-01-01'), 'events stats from year 0');
  });
});

describe('the 500 log', () => {
  test('a database error is logged with its SQLSTATE but without the query parameters', async () => {
    const secret = 'ssn-123-45-6789';
    const err = await server.ctx.database.db.execute(sql`select ${secret}::int`).then(
      () => assert.fail('the query must fail'),
      (e: unknown) => e,
    );
    assert.match(String((err as Error).message), /ssn-123-45-6789/, 'the driver error itself carries the parameter');
    const logged = JSON.stringify(loggableError(err));
    assert.ok(!logged.includes(secret), logged);
    assert.match(logged, /"sqlState":"22P02"/);
  });
});
