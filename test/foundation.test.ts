import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

describe('health and config', () => {
  test('GET /health answers ok when the database is reachable', async () => {
    const res = await server.api.get('/health');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
  });

  test('GET /config exposes the feature flags without authentication', async () => {
    const res = await server.api.get('/config');
    assert.equal(res.status, 200);
    assert.equal(res.body.signupEnabled, true);
    assert.equal(res.body.smtpConfigured, false);
    assert.equal(res.body.billingEnabled, false);
    assert.deepEqual(res.body.oauth, { github: false, google: false });
  });
});

describe('request ids and the error shape', () => {
  test('every response carries X-Request-ID, echoing a sane incoming one', async () => {
    const mine = await server.api.get('/health', { headers: { 'x-request-id': 'abc-123' } });
    assert.equal(mine.headers.get('x-request-id'), 'abc-123');
    const generated = await server.api.get('/health', { headers: { 'x-request-id': 'bad id with spaces' } });
    assert.match(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  test('an unknown route is a 404 in the error shape', async () => {
    const res = await server.api.get('/no/such/route', { headers: { 'x-request-id': 'req-404' } });
    assert.equal(res.status, 404);
    assert.equal(res.body.success, false);
    assert.equal(res.body.error.code, 'RESOURCE_NOT_FOUND');
    assert.equal(res.body.error.statusCode, 404);
    assert.equal(res.body.error.requestId, 'req-404');
    assert.ok(!Number.isNaN(Date.parse(res.body.timestamp)));
  });

  test('malformed JSON is a 400 INVALID_JSON', async () => {
    const res = await server.api.request('POST', '/auth/signup', {
      raw: '{"email": ',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_JSON');
  });
});

describe('bootstrap: signup, project, keys', () => {
  test('signup → project → keys, and the keys authenticate', async () => {
    const b = await bootstrap(server.api, 'Acme');
    assert.match(b.project.secretKey, /^sk_[A-Za-z0-9]{48}$/);
    assert.match(b.project.publicKey, /^pk_[A-Za-z0-9]{48}$/);
    assert.match(b.project.id, /^prj_/);
    const me = await server.api.get('/users/@me', { cookie: b.cookie });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, b.userId);
    assert.equal(me.body.passwordHash, undefined);
    const list = await server.api.get('/users/@me/projects', { cookie: b.cookie });
    assert.equal(list.body.length, 1);
    assert.equal(list.body[0].role, 'OWNER');
    assert.equal(list.body[0].secretKey, b.project.secretKey);
  });

  test('signup with a taken email is 409, a short password 422, bad login 401', async () => {
    const first = await server.api.post('/auth/signup', { email: 'Taken@Example.test', password: 'longenough' });
    assert.equal(first.status, 201);
    assert.equal(first.body.email, 'taken@example.test');
    const again = await server.api.post('/auth/signup', { email: 'taken@example.test', password: 'longenough' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'CONFLICT');
    const short = await server.api.post('/auth/signup', { email: 'short@example.test', password: 'short' });
    assert.equal(short.status, 422);
    assert.equal(short.body.error.errors[0].field, 'password');
    assert.equal(short.body.error.errors[0].code, 'too_small');
    const bad = await server.api.post('/auth/login', { email: 'taken@example.test', password: 'wrong-password' });
    assert.equal(bad.status, 401);
    assert.equal(bad.body.error.code, 'UNAUTHORIZED');
    const good = await server.api.post('/auth/login', { email: 'TAKEN@example.test', password: 'longenough' });
    assert.equal(good.status, 200);
    assert.match(good.headers.get('set-cookie') ?? '', /herald_session=.*HttpOnly.*SameSite=Lax/i);
  });

  test('regenerating keys invalidates the old secret key immediately', async () => {
    const b = await bootstrap(server.api);
    const before = await b.sk.get('/health'); // warm nothing; /health is public
    assert.equal(before.status, 200);
    const rotated = await server.api.post(`/users/@me/projects/${b.project.id}/regenerate-keys`, undefined, { cookie: b.cookie });
    assert.equal(rotated.status, 200);
    assert.notEqual(rotated.body.secretKey, b.project.secretKey);
    assert.notEqual(rotated.body.publicKey, b.project.publicKey);
  });
});
