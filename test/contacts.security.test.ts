import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
let b: Bootstrapped;
let stranger: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
  stranger = await bootstrap(server.api);
  await b.sk.post('/contacts', { email: 'member-visible@example.com' });
});
after(async () => server?.stop());

test('the dashboard session cookie with X-Project-Id lists the project’s contacts', async () => {
  const res = await server.api.get('/contacts', { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
  assert.equal(res.status, 200);
  assert.deepEqual(
    res.body.data.map((c: { email: string }) => c.email),
    ['member-visible@example.com'],
  );
  assert.equal(res.body.total, 1);
  const created = await server.api.post('/contacts', { email: 'from-dashboard@example.com' }, { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
  assert.equal(created.status, 201);
});

test('the cookie without X-Project-Id is 400; a project the user is not a member of is 403', async () => {
  const missing = await server.api.get('/contacts', { cookie: b.cookie });
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.code, 'BAD_REQUEST');
  const notMember = await server.api.get('/contacts', { cookie: stranger.cookie, headers: { 'x-project-id': b.project.id } });
  assert.equal(notMember.status, 403);
  assert.equal(notMember.body.error.code, 'FORBIDDEN');
  assert.ok(!notMember.text.includes('member-visible@example.com'));
});

test('a public key on /contacts is 401 INVALID_API_KEY; so are no key and a wrong key', async () => {
  for (const res of [
    await b.pk.get('/contacts'),
    await b.pk.post('/contacts', { email: 'pk@example.com' }),
    await server.api.get('/contacts'),
    await server.api.get('/contacts', { key: 'sk_wrong' }),
  ]) {
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'INVALID_API_KEY');
  }
  const rows = await server.sql('SELECT 1 FROM contacts WHERE email = $1', ['pk@example.com']);
  assert.equal(rows.length, 0);
});
