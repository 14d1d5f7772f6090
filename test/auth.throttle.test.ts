import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let sink: SmtpSink;
let server: TestServer; // behind a trusted proxy: each test speaks from its own X-Forwarded-For
let plain: TestServer; // the default: TRUST_PROXY off

before(async () => {
  sink = await startSmtpSink();
  [server, plain] = await Promise.all([
    startTestServer({
      SMTP_URL: sink.url,
      PUBLIC_URL: 'https://herald.example.test',
      TRUST_PROXY: 'true',
      MAX_PROJECTS_PER_USER: '3',
      SIGNUPS_PER_IP_PER_HOUR: '10',
    }),
    startTestServer({ API_RATE_LIMIT_PER_MINUTE: '5' }),
  ]);
});
after(async () => {
  await Promise.all([server?.stop(), plain?.stop()]);
  await sink?.stop();
});

let n = 0;
const unique = () => `${++n}-${Date.now()}`;
const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
const ipNo = (i: number) => `198.51.100.${i % 250}`;

describe('login throttling', () => {
  test('wrong passwords for one account slow down, then lock it (429 with Retry-After), even for the right password', async () => {
    const email = `victim-${unique()}@example.org`;
    assert.equal((await server.api.post('/auth/signup', { email, password: 'right password' }, from('203.0.113.1'))).status, 201);
    const statuses: number[] = [];
    const times: number[] = [];
    // Each attempt from another IP: only the per-account rule applies.
    for (let i = 0; i < 11; i++) {
      const t0 = Date.now();
      statuses.push((await server.api.post('/auth/login', { email, password: `wrong ${i}` }, from(ipNo(i + 1)))).status);
      times.push(Date.now() - t0);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 429]);
    assert.ok(times[9] >= 1000, `the 10th attempt is slowed down (${times[9]} ms)`);
    const locked = await server.api.post('/auth/login', { email, password: 'right password' }, from('203.0.113.77'));
    assert.equal(locked.status, 429);
    assert.equal(locked.body.error.code, 'RATE_LIMIT_EXCEEDED');
    const retryAfter = Number(locked.headers.get('retry-after'));
    assert.ok(retryAfter > 200 && retryAfter <= 300, `Retry-After ${retryAfter}`);
    assert.equal(locked.body.error.details.retryAfter, retryAfter);
    const other = `bystander-${unique()}@example.org`;
    assert.equal((await server.api.post('/auth/signup', { email: other, password: 'right password' }, from('203.0.113.2'))).status, 201);
    assert.equal(
      (await server.api.post('/auth/login', { email: other, password: 'right password' }, from('203.0.113.77'))).status,
      200,
      'other accounts are not locked',
    );
  });

  test('one IP guessing across many accounts is locked after 30 failures; other IPs are not', async () => {
    const ip = '192.0.2.200';
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) {
      statuses.push((await server.api.post('/auth/login', { email: `nobody-${unique()}@example.org`, password: 'guess' }, from(ip))).status);
    }
    assert.deepEqual(statuses.slice(0, 30), Array(30).fill(401));
    assert.equal(statuses[30], 429);
    const email = `fine-${unique()}@example.org`;
    await server.api.post('/auth/signup', { email, password: 'right password' }, from('192.0.2.201'));
    assert.equal((await server.api.post('/auth/login', { email, password: 'right password' }, from(ip))).status, 429);
    assert.equal((await server.api.post('/auth/login', { email, password: 'right password' }, from('192.0.2.202'))).status, 200);
  });

  test("a successful login clears the account's failures", async () => {
    const email = `forgetful-${unique()}@example.org`;
    await server.api.post('/auth/signup', { email, password: 'right password' }, from('192.0.2.50'));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 6; i++) assert.equal((await server.api.post('/auth/login', { email, password: 'nope' }, from('192.0.2.51'))).status, 401);
      assert.equal((await server.api.post('/auth/login', { email, password: 'right password' }, from('192.0.2.51'))).status, 200);
    }
  });
});

describe('signup and password-reset throttling', () => {
  test('one IP may sign up 10 times an hour; the 11th is refused', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await server.api.post('/auth/signup', { email: `bulk-${unique()}@example.org`, password: 'long enough pw' }, from('192.0.2.60'))).status);
    }
    assert.deepEqual(statuses, [201, 201, 201, 201, 201, 201, 201, 201, 201, 201, 429]);
  });

  test('one reset email per address per five minutes, whatever the number of requests', async () => {
    const email = `reset-${unique()}@example.org`;
    await server.api.post('/auth/signup', { email, password: 'long enough pw' }, from('192.0.2.70'));
    for (let i = 0; i < 4; i++) {
      assert.equal((await server.api.post('/auth/request-password-reset', { email }, from(ipNo(100 + i)))).status, 200);
    }
    await new Promise((r) => setTimeout(r, 1500));
    const mails = sink.messages.filter((m) => m.envelope.to.includes(email) && m.parsed.subject === 'Reset your Herald password');
    assert.equal(mails.length, 1);
  });

  test("one verification email per account per five minutes (the signup's included), whatever the number of requests", async () => {
    const email = `verify-${unique()}@example.org`;
    const signup = await server.api.post('/auth/signup', { email, password: 'long enough pw' }, from('192.0.2.75'));
    const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
    const resend = () => server.api.post('/auth/request-verification', undefined, { cookie });
    const answers = await Promise.all(Array.from({ length: 30 }, resend));
    assert.deepEqual(new Set(answers.map((r) => `${r.status} ${r.body.alreadyVerified}`)), new Set(['200 false']));
    const confirmations = () => sink.messages.filter((m) => m.envelope.to.includes(email) && m.parsed.subject === 'Confirm your email address');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(confirmations().length, 1);

    // Five minutes later, one more.
    await server.sql(`UPDATE auth_throttle SET window_start = now() - interval '301 seconds' WHERE key = $1`, [`verify-mail:${signup.body.id}`]);
    assert.equal((await resend()).status, 200);
    assert.equal((await resend()).status, 200);
    for (const deadline = Date.now() + 10_000; confirmations().length < 2 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(confirmations().length, 2);
  });

  test('reset requests from one IP are locked after 10', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await server.api.post('/auth/request-password-reset', { email: `x-${unique()}@example.org` }, from('192.0.2.80'))).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429]);
  });
});

describe('bursts: concurrent attempts are counted before any is checked', () => {
  const tally = (statuses: number[]) => statuses.reduce<Record<number, number>>((acc, st) => ({ ...acc, [st]: (acc[st] ?? 0) + 1 }), {});

  /** Peak growth of this process's RSS (the server runs in it) while `work` runs, in MB. */
  async function rssGrowthDuring<T>(work: () => Promise<T>): Promise<{ result: T; growthMb: number }> {
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      const result = await work();
      return { result, growthMb: Math.round((peak - rss0) / 1e6) };
    } finally {
      clearInterval(sampler);
    }
  }

  test('40 wrong passwords at once for one account: exactly 10 are checked, the other 30 are 429 and the account is locked', async (t) => {
    const email = `burst-victim-${unique()}@example.org`;
    const bystander = `burst-bystander-${unique()}@example.org`;
    for (const [who, ip] of [
      [email, '203.0.113.150'],
      [bystander, '203.0.113.151'],
    ]) {
      assert.equal((await server.api.post('/auth/signup', { email: who, password: 'right password' }, from(ip))).status, 201);
    }
    const flood = Promise.all(Array.from({ length: 40 }, (_, i) => server.api.post('/auth/login', { email, password: `guess ${i}` }, from('203.0.113.152'))));
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    const other = await server.api.post('/auth/login', { email: bystander, password: 'right password' }, from('203.0.113.153'));
    const otherMs = Date.now() - t0;
    const answers = await flood;
    t.diagnostic(`another account's login took ${otherMs} ms during the burst`);

    assert.deepEqual(tally(answers.map((r) => r.status)), { 401: 10, 429: 30 }, 'only the first 10 passwords were checked');
    for (const refused of answers.filter((r) => r.status === 429)) {
      assert.equal(refused.body.error.code, 'RATE_LIMIT_EXCEEDED');
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter > 200 && retryAfter <= 300, `Retry-After ${retryAfter}`);
      assert.equal(refused.body.error.details.retryAfter, retryAfter);
    }
    const [counter] = await server.sql<{ count: number; locked: boolean }>(`SELECT count, locked_until > now() AS locked FROM auth_throttle WHERE key = $1`, [
      `login-account:${email}`,
    ]);
    assert.deepEqual(counter, { count: 10, locked: true });
    assert.equal((await server.api.post('/auth/login', { email, password: 'right password' }, from('203.0.113.154'))).status, 429);
    assert.equal(other.status, 200, 'another account signs in meanwhile');
    assert.ok(otherMs < 5000, `another account's login waited ${otherMs} ms`);
  });

  test('a session guessing the current password at /auth/change-password counts against the account as failed logins do: of 40 at once, 10 are checked', async () => {
    const email = `stolen-session-${unique()}@example.org`;
    const signed = await server.api.post('/auth/signup', { email, password: 'right password' }, from('203.0.113.160'));
    assert.equal(signed.status, 201);
    const cookie = (signed.headers.get('set-cookie') ?? '').split(';')[0];
    const guesses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        server.api.post('/auth/change-password', { currentPassword: `guess ${i}`, password: 'attacker owns this' }, { cookie, ...from('203.0.113.161') }),
      ),
    );
    assert.deepEqual(tally(guesses.map((r) => r.status)), { 403: 10, 429: 30 }, 'only the first 10 current passwords were checked');
    const refused = guesses.find((r) => r.status === 429);
    assert.equal(refused?.body.error.code, 'RATE_LIMIT_EXCEEDED');
    // The right password is refused too while the account is locked, here and at the login.
    const right = await server.api.post('/auth/change-password', { currentPassword: 'right password', password: 'attacker owns this' }, { cookie });
    assert.equal(right.status, 429);
    assert.equal((await server.api.post('/auth/login', { email, password: 'right password' }, from('203.0.113.162'))).status, 429);
    assert.equal((await server.api.post('/auth/login', { email, password: 'attacker owns this' }, from('203.0.113.162'))).status, 429);
    const [counter] = await server.sql<{ count: number }>(`SELECT count FROM auth_throttle WHERE key = $1`, [`login-account:${email}`]);
    assert.equal(counter.count, 10);
  });

  test("a right current password at /auth/change-password clears the account's failures", async () => {
    const email = `changer-${unique()}@example.org`;
    const signed = await server.api.post('/auth/signup', { email, password: 'password 0' }, from('203.0.113.170'));
    const cookie = (signed.headers.get('set-cookie') ?? '').split(';')[0];
    // Twice 6 failures: 12 would lock the account (10) unless the change in between cleared them.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 6; i++) {
        assert.equal((await server.api.post('/auth/change-password', { currentPassword: 'nope', password: 'never used' }, { cookie })).status, 403);
      }
      const changed = await server.api.post('/auth/change-password', { currentPassword: `password ${round}`, password: `password ${round + 1}` }, { cookie });
      assert.equal(changed.status, 200, changed.text);
    }
    assert.equal((await server.api.post('/auth/login', { email, password: 'password 2' }, from('203.0.113.171'))).status, 200);
  });

  test('40 signups at once from one IP create exactly SIGNUPS_PER_IP_PER_HOUR (10) accounts', async () => {
    const tag = `burst-signup-${unique()}`;
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        server.api.post('/auth/signup', { email: `${tag}-${i}@example.org`, password: 'long enough pw' }, from('192.0.2.61')),
      ),
    );
    assert.deepEqual(tally(answers.map((r) => r.status)), { 201: 10, 429: 30 });
    const refused = answers.find((r) => r.status === 429)!;
    assert.equal(refused.body.error.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(Number(refused.headers.get('retry-after')), refused.body.error.details.retryAfter);
    const [{ created }] = await server.sql<{ created: number }>(`SELECT count(*)::int AS created FROM users WHERE email LIKE $1`, [`${tag}-%`]);
    assert.equal(created, 10);
  });

  test('24 logins at once from 24 IPs for 24 accounts: every password is checked, and the process grows by less than 100 MB', async (t) => {
    // Unknown accounts: each login still checks a password (against a dummy hash), so all 24 hash.
    const { result: answers, growthMb } = await rssGrowthDuring(() =>
      Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          server.api.post('/auth/login', { email: `burst-nobody-${unique()}@example.org`, password: 'guess' }, from(`198.18.7.${i + 1}`)),
        ),
      ),
    );
    t.diagnostic(`RSS grew by ${growthMb} MB`);
    assert.deepEqual(tally(answers.map((r) => r.status)), { 401: 24 });
    assert.ok(growthMb < 100, `RSS grew by ${growthMb} MB during the burst (argon2 at 64 MiB × 4 threads grows it by ~260)`);
  });
});

describe('projects and cookie routes', () => {
  test('a user owns at most MAX_PROJECTS_PER_USER projects', async () => {
    const signup = await server.api.post('/auth/signup', { email: `many-${unique()}@example.org`, password: 'long enough pw' }, from('192.0.2.90'));
    const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
    const created = await Promise.all(Array.from({ length: 5 }, (_, i) => server.api.post('/users/@me/projects', { name: `P${i}` }, { cookie })));
    assert.deepEqual(created.map((r) => r.status).sort(), [201, 201, 201, 403, 403]);
    const refused = created.find((r) => r.status === 403)!;
    assert.equal(refused.body.error.code, 'FORBIDDEN');
    assert.deepEqual(refused.body.error.details, { limit: 3 });
    assert.equal((await server.api.get('/users/@me/projects', { cookie })).body.length, 3);
  });

  test('each signed-in user has a request budget on cookie routes', async () => {
    const signup = await plain.api.post('/auth/signup', { email: `busy-${unique()}@example.org`, password: 'long enough pw' });
    const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await plain.api.get('/users/@me', { cookie })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
    const other = await plain.api.post('/auth/signup', { email: `calm-${unique()}@example.org`, password: 'long enough pw' });
    const otherCookie = (other.headers.get('set-cookie') ?? '').split(';')[0];
    assert.equal((await plain.api.get('/users/@me', { cookie: otherCookie })).status, 200, 'the budget is per user');
  });
});

describe('TRUST_PROXY', () => {
  test('off by default: X-Forwarded-For cannot choose the IP that is limited', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await plain.api.post('/auth/request-password-reset', { email: `nobody-${unique()}@example.org` }, from(ipNo(i)))).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429], 'a new X-Forwarded-For per request did not escape the per-IP lock');
  });
});
