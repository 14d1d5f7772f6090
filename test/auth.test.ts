import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { recordStatements } from './helpers/statements.ts';

let sink: SmtpSink;
let server: TestServer;

before(async () => {
  sink = await startSmtpSink();
  server = await startTestServer({ SMTP_URL: sink.url, PUBLIC_URL: 'https://herald.example.test' });
});
after(async () => {
  await server?.stop();
  await sink?.stop();
});

const linkIn = async (to: string, path: string) => {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const msg = sink.messages.findLast((m) => m.envelope.to.includes(to) && String(m.parsed.html).includes(path));
    if (msg) {
      const m = new RegExp(`https://herald\\.example\\.test${path}\\?token=([\\w.-]+)`).exec(String(msg.parsed.html));
      assert.ok(m, 'the email carries a link with a token');
      return { token: m[1], msg };
    }
    assert.ok(Date.now() < deadline, `no email to ${to} with ${path}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe('account emails', () => {
  test('signup sends a verification email; its token verifies the address once', async () => {
    const signup = await server.api.post('/auth/signup', { email: 'new@example.org', password: 'long enough pw' });
    assert.equal(signup.status, 201);
    assert.equal(signup.body.emailVerified, false);
    const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
    const { token, msg } = await linkIn('new@example.org', '/auth/verify-email');
    assert.equal(msg.parsed.from?.value[0].address, 'no-reply@herald.example.test');
    assert.equal(msg.parsed.subject, 'Confirm your email address');
    const bad = await server.api.post('/auth/verify-email', { token: token.slice(0, -5) + 'AAAAA' });
    assert.equal(bad.status, 400);
    const ok = await server.api.post('/auth/verify-email', { token });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.emailVerified, true);
    const me = await server.api.get('/users/@me', { cookie });
    assert.equal(me.body.emailVerified, true);
    const again = await server.api.post('/auth/request-verification', undefined, { cookie });
    assert.equal(again.body.alreadyVerified, true);
  });

  test('password reset: always 200, the emailed token sets a new password and works once', async () => {
    await server.api.post('/auth/signup', { email: 'reset@example.org', password: 'first password' });
    const unknown = await server.api.post('/auth/request-password-reset', { email: 'nobody@example.org' });
    assert.equal(unknown.status, 200, 'no account enumeration');
    const asked = await server.api.post('/auth/request-password-reset', { email: 'Reset@Example.org' });
    assert.equal(asked.status, 200);
    const { token } = await linkIn('reset@example.org', '/app/reset-password');
    const short = await server.api.post('/auth/reset-password', { token, password: 'short' });
    assert.equal(short.status, 422);
    const done = await server.api.post('/auth/reset-password', { token, password: 'second password' });
    assert.equal(done.status, 200);
    const reused = await server.api.post('/auth/reset-password', { token, password: 'third password' });
    assert.equal(reused.status, 400, 'a reset token stops working once the password changed');
    assert.equal((await server.api.post('/auth/login', { email: 'reset@example.org', password: 'first password' })).status, 401);
    assert.equal((await server.api.post('/auth/login', { email: 'reset@example.org', password: 'second password' })).status, 200);
  });

  test('a reset token used several times at once works once', async () => {
    await server.api.post('/auth/signup', { email: 'race@example.org', password: 'first password' });
    await server.api.post('/auth/request-password-reset', { email: 'race@example.org' });
    const { token } = await linkIn('race@example.org', '/app/reset-password');
    const passwords = ['password one', 'password two', 'password three', 'password four'];
    const answers = await Promise.all(passwords.map((password) => server.api.post('/auth/reset-password', { token, password })));
    assert.deepEqual(answers.map((r) => r.status).sort(), [200, 400, 400, 400], answers.map((r) => r.text).join('\n'));
    for (const r of answers.filter((a) => a.status === 400)) assert.equal(r.body.error.code, 'BAD_REQUEST');
    const logins = [];
    for (const password of passwords) logins.push((await server.api.post('/auth/login', { email: 'race@example.org', password })).status);
    assert.deepEqual(
      logins,
      answers.map((r) => (r.status === 200 ? 200 : 401)),
      'the password set is the one whose answer was 200',
    );
  });

  test('a reset request does the same database work for a known and an unknown address (no timing difference to measure)', async () => {
    const api = await startTestServer({ PROCESS_ROLE: 'api' });
    try {
      assert.equal((await api.api.post('/auth/signup', { email: 'known@example.org', password: 'long enough pw' })).status, 201);
      const statements = recordStatements();
      const database = new URL(api.databaseUrl).pathname.slice(1); // not the other test server's pollers
      // The statements of the request itself: the account, the throttle and the job queue.
      const workOf = async (email: string) => {
        const from = statements.texts.length;
        assert.equal((await api.api.post('/auth/request-password-reset', { email })).status, 200);
        return statements.texts.slice(from).filter((t, i) => statements.databases[from + i] === database && /\busers\b|auth_throttle|pgboss\.job/.test(t));
      };
      const known = await workOf('known@example.org');
      const unknown = await workOf('unknown@example.org');
      assert.ok(
        known.some((t) => t.includes('pgboss.job')),
        known.join('\n'),
      );
      assert.deepEqual(known, unknown);
      // Nothing is mailed by the API process (this one runs no worker): the signup's confirmation only.
      const queued = await api.sql<{ name: string; what: string }>(
        `SELECT name, coalesce(data->>'email', data->>'subject') AS what FROM pgboss.job WHERE name IN ('password-reset-request', 'system-mail') ORDER BY created_on, name`,
      );
      assert.deepEqual(queued, [
        { name: 'system-mail', what: 'Confirm your email address' },
        { name: 'password-reset-request', what: 'known@example.org' },
        { name: 'password-reset-request', what: 'unknown@example.org' },
      ]);
    } finally {
      await api.stop();
    }
  });

  test('DISABLE_SIGNUP refuses signups once a user exists', async () => {
    const closed = await startTestServer({ DISABLE_SIGNUP: 'true' });
    try {
      assert.equal((await closed.api.post('/auth/signup', { email: 'first@example.org', password: 'long enough pw' })).status, 201);
      const second = await closed.api.post('/auth/signup', { email: 'second@example.org', password: 'long enough pw' });
      assert.equal(second.status, 403);
      assert.equal(second.body.error.code, 'FORBIDDEN');
      assert.equal((await closed.api.get('/config')).body.signupEnabled, false);
    } finally {
      await closed.stop();
    }
  });
});
