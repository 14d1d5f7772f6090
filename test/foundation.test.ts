import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config.ts';
import { freePort } from '../src/db/embedded.ts';
import { type TestServer, createTestDatabase, startTestServer } from './helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

describe('health and config', () => {
  test('GET /health answers ok when the database is reachable', async () => {
    const res = await server.api.get('/health');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok', checks: { database: 'ok', secrets: 'ok', disk: 'unwatched' } });
  });

  test('GET /config exposes the feature flags without authentication', async () => {
    const res = await server.api.get('/config');
    assert.equal(res.status, 200);
    assert.equal(res.body.signupEnabled, true);
    assert.equal(res.body.smtpConfigured, false);
    assert.equal(res.body.sandboxDomain, 'sandbox.herald.test', 'mail is captured: the sandbox sender works');
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

  test('an over-long path parameter is answered in the error shape', async () => {
    const b = await bootstrap(server.api);
    const res = await b.sk.get(`/contacts/cnt_${'a'.repeat(1200)}`);
    assert.equal(res.status, 414);
    assert.equal(res.body.success, false);
    assert.equal(res.body.error.code, 'URI_TOO_LONG');
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
    // Secret keys are stored hashed (issue 14, finding 9): shown once at creation, a prefix afterwards.
    assert.equal(list.body[0].secretKey, null);
    assert.equal(list.body[0].secretKeyPrefix, b.project.secretKey.slice(0, 11));
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
});

describe('API keys', () => {
  test('a rotated key stops working at once, in every process sharing the database', async () => {
    const b = await bootstrap(server.api);
    const second = await startTestServer({ PROCESS_ROLE: 'api' }, { databaseUrl: server.databaseUrl });
    try {
      const oldKey = b.project.secretKey;
      assert.equal((await server.api.get('/contacts', { key: oldKey })).status, 200);
      assert.equal((await second.api.get('/contacts', { key: oldKey })).status, 200, 'both processes cached the key');
      const rotated = await server.api.post(`/users/@me/projects/${b.project.id}/regenerate-keys`, undefined, { cookie: b.cookie });
      assert.equal(rotated.status, 200);
      assert.match(rotated.body.secretKey, /^sk_/);
      assert.notEqual(rotated.body.secretKey, oldKey);
      assert.notEqual(rotated.body.publicKey, b.project.publicKey);
      const deadline = Date.now() + 2000; // NOTIFY reaches the other process asynchronously
      let seen = 0;
      while (Date.now() < deadline && (seen = (await second.api.get('/contacts', { key: oldKey })).status) !== 401) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(seen, 401);
      const here = await server.api.get('/contacts', { key: oldKey });
      assert.equal(here.status, 401);
      assert.equal(here.body.error.code, 'INVALID_API_KEY');
      assert.equal((await second.api.get('/contacts', { key: rotated.body.secretKey })).status, 200);
    } finally {
      await second.stop();
    }
  });

  test('missing, malformed and public keys on dashboard endpoints are 401 INVALID_API_KEY', async () => {
    const b = await bootstrap(server.api);
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Bearer nope' },
      { authorization: 'Basic abc' },
      { authorization: `Bearer ${b.project.publicKey}` },
    ]) {
      const res = await server.api.get('/contacts', { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(res.body.error.code, 'INVALID_API_KEY');
    }
  });

  test('a disabled project is 403 PROJECT_DISABLED', async () => {
    const b = await bootstrap(server.api);
    await server.sql(`UPDATE projects SET disabled = true, disabled_reason = 'EMAIL_REPUTATION' WHERE id = $1`, [b.project.id]);
    await server.ctx.keys.notifyChanged(b.project.id);
    const res = await b.sk.get('/contacts');
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'PROJECT_DISABLED');
    assert.equal(res.body.error.details.reason, 'EMAIL_REPUTATION');
  });

  test('session cookie + X-Project-Id works for members only', async () => {
    const b = await bootstrap(server.api);
    const stranger = await bootstrap(server.api);
    const ok = await server.api.get('/contacts', { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
    assert.equal(ok.status, 200);
    const missing = await server.api.get('/contacts', { cookie: b.cookie });
    assert.equal(missing.status, 400);
    const foreign = await server.api.get('/contacts', { cookie: stranger.cookie, headers: { 'x-project-id': b.project.id } });
    assert.equal(foreign.status, 403);
    assert.equal(foreign.body.error.code, 'FORBIDDEN');
    const forged = await server.api.get('/contacts', { cookie: 'herald_session=abc.def.ghi', headers: { 'x-project-id': b.project.id } });
    assert.equal(forged.status, 401);
    assert.equal(forged.body.error.code, 'UNAUTHORIZED');
  });
});

describe('rate limit', () => {
  test('per project over a sliding minute, with RateLimit-* headers and a 429 carrying Retry-After', async () => {
    const limited = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '5' });
    try {
      const b = await bootstrap(limited.api);
      const other = await bootstrap(limited.api);
      for (let i = 1; i <= 5; i++) {
        const res = await b.sk.get('/contacts');
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('ratelimit-limit'), '5');
        assert.equal(res.headers.get('ratelimit-remaining'), String(5 - i));
      }
      const over = await b.sk.get('/contacts');
      assert.equal(over.status, 429);
      assert.equal(over.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.ok(over.body.error.details.retryAfter >= 1);
      assert.ok(Number(over.headers.get('retry-after')) >= 1);
      assert.equal((await other.sk.get('/contacts')).status, 200, 'another project has its own budget');
    } finally {
      await limited.stop();
    }
  });
});

describe('start-up', () => {
  test('two processes starting at once against one database apply the migrations once', async () => {
    const databaseUrl = await createTestDatabase();
    const [a, c] = await Promise.all([startTestServer({}, { databaseUrl }), startTestServer({ PROCESS_ROLE: 'api' }, { databaseUrl })]);
    try {
      const migrations = readdirSync(new URL('../src/db/migrations', import.meta.url)).filter((f) => f.endsWith('.sql'));
      const applied = await a.sql<{ n: number }>('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations');
      assert.equal(applied[0].n, migrations.length);
      assert.equal((await a.api.get('/health')).status, 200);
      assert.equal((await c.api.get('/health')).status, 200);
    } finally {
      await Promise.all([a.stop(), c.stop()]);
    }
  });

  test('npm start on an empty DATA_DIR: embedded PostgreSQL, serves, and SIGTERM exits 0 after a clean stop', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-start-'));
    chmodSync(dataDir, 0o755);
    const port = await freePort();
    const child = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      // A first start runs initdb and every migration; on a loaded CI machine that has taken
      // over 30 s, so wait as long as the other process tests do.
      let health = 0;
      const deadline = Date.now() + 180_000;
      while (health !== 200 && child.exitCode === null && Date.now() < deadline) {
        health = await fetch(`http://127.0.0.1:${port}/health`).then(
          (r) => r.status,
          () => 0,
        );
        if (health !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(health, 200, `never healthy (exit code ${child.exitCode}); it printed:\n${output}`);
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
      assert.equal(output, '', 'nothing failed while stopping (the database outlives the requests and jobs)');
      assert.equal(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), false, 'PostgreSQL was stopped cleanly');
      assert.ok(existsSync(path.join(dataDir, 'jwt-secret')), 'the generated JWT secret is kept in DATA_DIR');
    } finally {
      child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('invalid configuration names the variable', () => {
    assert.throws(
      () => loadConfig({ PORT: 'abc' }),
      (err: Error) => err instanceof ConfigError && /PORT/.test(err.message),
    );
    assert.throws(() => loadConfig({ DATABASE_URL: 'mysql://x' }), /DATABASE_URL/);
    assert.throws(() => loadConfig({ PROCESS_ROLE: 'both' }), /PROCESS_ROLE/);
    const run = spawnSync(process.execPath, ['src/main.ts'], { env: { ...process.env, PORT: 'abc' }, encoding: 'utf8' });
    assert.equal(run.status, 1);
    assert.equal(run.stderr.trim().split('\n').length, 1);
    assert.match(run.stderr, /PORT/);
  });

  test('a JSON body over the limit is 413 and an unknown content type 415', async () => {
    const big = await server.api.request('POST', '/auth/signup', {
      raw: JSON.stringify({ email: 'a@b.co', password: 'x'.repeat(10 * 1024 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(big.status, 413);
    assert.equal(big.body.error.code, 'PAYLOAD_TOO_LARGE');
    const xml = await server.api.request('POST', '/auth/signup', { raw: '<a/>', headers: { 'content-type': 'application/xml' } });
    assert.equal(xml.status, 415);
    assert.equal(xml.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
  });
});
