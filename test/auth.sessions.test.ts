import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startRuntime } from '../src/runtime.ts';
import { createApi } from './helpers/http.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { type TestServer, createTestDatabase, startTestServer } from './helpers/server.ts';
import { removeTempDataDirs, tempDataDir } from './helpers/data-dir.ts';

let sink: SmtpSink;
let server: TestServer;

before(async () => {
  sink = await startSmtpSink();
  server = await startTestServer({ SMTP_URL: sink.url, PUBLIC_URL: 'https://herald.example.test' });
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await removeTempDataDirs();
});

let n = 0;
const address = (what: string) => `${what}-${++n}-${Date.now()}@example.org`;

/** The token of the newest link to `path` mailed to `to`. */
async function tokenMailed(to: string, path: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const msg = sink.messages.findLast((m) => m.envelope.to.includes(to) && String(m.parsed.html).includes(path));
    const m = msg && new RegExp(`${path}\\?token=([\\w.-]+)`).exec(String(msg.parsed.html));
    if (m) return m[1];
    assert.ok(Date.now() < deadline, `no email to ${to} with ${path}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cookieOf = (res: { headers: Headers }) => (res.headers.get('set-cookie') ?? '').split(';')[0];

async function signup(email: string, password = 'first password') {
  const res = await server.api.post('/auth/signup', { email, password });
  assert.equal(res.status, 201, res.text);
  return cookieOf(res);
}

async function login(email: string, password = 'first password') {
  const res = await server.api.post('/auth/login', { email, password });
  assert.equal(res.status, 200, res.text);
  return cookieOf(res);
}

const me = (cookie: string) => server.api.get('/users/@me', { cookie });
const projects = (cookie: string) => server.api.get('/users/@me/projects', { cookie });

describe('token purposes', () => {
  test('a verify-email or reset token used as the session cookie is 401, and a session is not an account token', async () => {
    const email = address('purpose');
    const cookie = await signup(email);
    assert.equal((await server.api.post('/users/@me/projects', { name: 'P' }, { cookie })).status, 201);
    const verifyToken = await tokenMailed(email, '/auth/verify-email');
    await server.api.post('/auth/request-password-reset', { email });
    const resetToken = await tokenMailed(email, '/app/reset-password');

    for (const [name, token] of Object.entries({ verifyToken, resetToken })) {
      const list = await projects(`herald_session=${token}`);
      assert.equal(list.status, 401, `${name} as a session: ${list.text}`);
      assert.equal(list.body.error.code, 'UNAUTHORIZED');
      assert.equal((await me(`herald_session=${token}`)).status, 401);
      const dashboard = await server.api.get('/contacts', { cookie: `herald_session=${token}`, headers: { 'x-project-id': 'prj_x' } });
      assert.equal(dashboard.status, 401, `${name} on a project route`);
    }
    const session = cookie.slice('herald_session='.length);
    assert.equal((await server.api.post('/auth/verify-email', { token: session })).status, 400, 'a session does not verify the address');
    assert.equal((await server.api.post('/auth/reset-password', { token: session, password: 'hijacked password' })).status, 400);
    assert.equal((await server.api.post('/auth/reset-password', { token: verifyToken, password: 'hijacked password' })).status, 400);
    assert.equal((await server.api.post('/auth/verify-email', { token: resetToken })).status, 400);

    // The right token for the right purpose still works.
    assert.equal((await server.api.post('/auth/verify-email', { token: verifyToken })).body.emailVerified, true);
    assert.equal((await projects(cookie)).body.length, 1);
  });
});

describe('revocable sessions', () => {
  test('logout ends the session itself: a copy of the cookie stops working', async () => {
    const email = address('logout');
    const cookie = await signup(email);
    assert.equal((await me(cookie)).status, 200);
    const out = await server.api.get('/auth/logout', { cookie });
    assert.equal(out.status, 200);
    assert.match(out.headers.get('set-cookie') ?? '', /herald_session=;/);
    const stolen = await me(cookie);
    assert.equal(stolen.status, 401);
    assert.equal(stolen.body.error.code, 'UNAUTHORIZED');
  });

  test('a sign-out that another site starts (a link or redirect, which carries the cookie) is refused', async () => {
    const cookie = await signup(address('forced-logout'));
    for (const site of ['cross-site', 'same-site']) {
      const res = await server.api.get('/auth/logout', { cookie, headers: { 'sec-fetch-site': site } });
      assert.equal(res.status, 403, site);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.equal(res.headers.get('set-cookie'), null, 'the cookie is left as it is');
    }
    assert.equal((await me(cookie)).status, 200, 'the session still works');
    // The dashboard's own request, and one typed in the address bar.
    const own = await server.api.get('/auth/logout', { cookie, headers: { 'sec-fetch-site': 'same-origin' } });
    assert.equal(own.status, 200);
    assert.equal((await me(cookie)).status, 401);
    const typed = await signup(address('typed-logout'));
    assert.equal((await server.api.get('/auth/logout', { cookie: typed, headers: { 'sec-fetch-site': 'none' } })).status, 200);
    assert.equal((await me(typed)).status, 401);
  });

  test("logout-all ends every session of the user on every device, not other users' sessions", async () => {
    const email = address('everywhere');
    const laptop = await signup(email);
    const phone = await login(email);
    const other = await signup(address('bystander'));
    assert.equal((await me(phone)).status, 200);
    const res = await server.api.post('/auth/logout-all', undefined, { cookie: laptop });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { success: true });
    assert.equal((await me(laptop)).status, 401);
    assert.equal((await me(phone)).status, 401);
    assert.equal((await projects(phone)).status, 401);
    assert.equal((await me(other)).status, 200, 'another user is untouched');
    assert.equal((await server.api.post('/auth/logout-all')).status, 401, 'needs a session');
    const again = await login(email);
    assert.equal((await me(again)).status, 200, 'signing in again works');
  });

  test('a password reset ends every session', async () => {
    const email = address('reset');
    const cookie = await signup(email);
    await server.api.post('/auth/request-password-reset', { email });
    const token = await tokenMailed(email, '/app/reset-password');
    assert.equal((await server.api.post('/auth/reset-password', { token, password: 'second password' })).status, 200);
    assert.equal((await me(cookie)).status, 401, 'the session from before the reset is over');
    assert.equal((await me(await login(email, 'second password'))).status, 200);
  });

  test('a password change needs the current password and ends every other session', async () => {
    const email = address('change');
    const here = await signup(email);
    const elsewhere = await login(email);
    const wrong = await server.api.post('/auth/change-password', { currentPassword: 'not it', password: 'second password' }, { cookie: here });
    assert.equal(wrong.status, 403);
    assert.equal(wrong.body.error.code, 'FORBIDDEN');
    assert.equal((await me(elsewhere)).status, 200, 'a failed change ends nothing');
    const short = await server.api.post('/auth/change-password', { currentPassword: 'first password', password: 'short' }, { cookie: here });
    assert.equal(short.status, 422);
    const ok = await server.api.post('/auth/change-password', { currentPassword: 'first password', password: 'second password' }, { cookie: here });
    assert.equal(ok.status, 200, ok.text);
    assert.equal((await me(here)).status, 200, 'the session that changed it continues');
    assert.equal((await me(elsewhere)).status, 401);
    assert.equal((await server.api.post('/auth/login', { email, password: 'first password' })).status, 401);
    assert.equal((await server.api.post('/auth/login', { email, password: 'second password' })).status, 200);
  });

  test('a session of a deleted user or with a forged session id is 401', async () => {
    const email = address('forged');
    const cookie = await signup(email);
    const [payload] = cookie.slice('herald_session='.length).split('.').slice(1, 2);
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    assert.equal(claims.typ, 'session');
    assert.equal(typeof claims.sid, 'string');
    await server.sql('DELETE FROM users WHERE email = $1', [email]);
    assert.equal((await me(cookie)).status, 401);
  });
});

describe('account tokens stay out of the request log', () => {
  test('GET /auth/verify-email?token=… is logged without its query string', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const config = loadConfig({
      DATABASE_URL: await createTestDatabase(),
      DATA_DIR: await tempDataDir('herald-test-data-'),
      JWT_SECRET: 'test-secret-0123456789abcdef',
      PROCESS_ROLE: 'api',
      PORT: '0',
    });
    const runtime = await startRuntime(config, { log: pino({ level: 'info' }, stream) });
    try {
      await runtime.app!.listen({ port: 0, host: '127.0.0.1' });
      const { port } = runtime.app!.server.address() as { port: number };
      const api = createApi(`http://127.0.0.1:${port}`);
      const secret = 'eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2VuLXZhbHVl.c2lnbmF0dXJl';
      assert.equal((await api.get(`/auth/verify-email?token=${secret}`)).status, 400);
      await api.get(`/auth/reset-password?token=${secret}`);
      await api.get('/config?probe=kept');
      const log = lines.join('');
      assert.match(log, /"url":"\/auth\/verify-email\?(\[redacted\]|token=\*\*\*)"/);
      assert.match(log, /"url":"\/config\?probe=kept"/, 'other routes keep their query string');
      assert.ok(!log.includes('c2VjcmV0LXRva2VuLXZhbHVl'), 'the token is nowhere in the log');
    } finally {
      await runtime.stop();
    }
  });
});
