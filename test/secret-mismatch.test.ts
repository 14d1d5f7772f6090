import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startRuntime } from '../src/runtime.ts';
import { StartupError } from '../src/startup-error.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { removeTempDataDirs, tempDataDir } from './helpers/data-dir.ts';

// A worker on a second host with its own DATA_DIR generates its own JWT_SECRET and could not
// decrypt the DKIM keys: it must refuse to start, naming JWT_SECRET, instead of failing every email.

let server: TestServer;
before(async () => {
  server = await startTestServer();
  const b = await bootstrap(server.api);
  const res = await b.sk.post('/domains', { domain: 'mail.secret-check.example' });
  assert.equal(res.status, 201, res.text);
});
after(async () => {
  await server?.stop();
  await removeTempDataDirs();
});

const quiet = pino({ level: 'silent' });

test('a worker whose JWT_SECRET cannot decrypt the stored DKIM keys refuses to start with one line', async () => {
  const dataDir = await tempDataDir('herald-second-host-');
  const config = loadConfig({ DATABASE_URL: server.databaseUrl, DATA_DIR: dataDir, PROCESS_ROLE: 'worker', LOG_LEVEL: 'silent' });
  await assert.rejects(startRuntime(config, { log: quiet }), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.equal(
      err.message,
      `JWT_SECRET is not the secret that encrypted the DKIM keys in this database (this process generated its own into ${dataDir}): give every Herald process of this installation the same JWT_SECRET`,
    );
    return true;
  });
});

test('with the shared JWT_SECRET the worker starts', async () => {
  const dataDir = await tempDataDir('herald-second-host-');
  const config = loadConfig({
    DATABASE_URL: server.databaseUrl,
    DATA_DIR: dataDir,
    PROCESS_ROLE: 'worker',
    JWT_SECRET: 'test-secret-0123456789abcdef',
    LOG_LEVEL: 'silent',
  });
  const runtime = await startRuntime(config, { log: quiet });
  assert.equal(runtime.app, null);
  await runtime.stop();
});

test('an API process with another JWT_SECRET refuses to start too (it would accept none of the API keys)', async () => {
  const dataDir = await tempDataDir('herald-second-host-');
  const config = loadConfig({ DATABASE_URL: server.databaseUrl, DATA_DIR: dataDir, PROCESS_ROLE: 'api', LOG_LEVEL: 'silent' });
  await assert.rejects(startRuntime(config, { log: quiet }), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(
      err.message,
      /^JWT_SECRET is not the secret that encrypted the DKIM keys in this database .*: give every Herald process of this installation the same JWT_SECRET$/,
    );
    return true;
  });
  const ours = await server.api.get('/health');
  assert.deepEqual(ours.body, { status: 'ok', checks: { database: 'ok', secrets: 'ok', disk: 'unwatched' } });
});

test('before any domain exists, the database still knows the secret: a worker with another one refuses to start', async () => {
  const fresh = await startTestServer();
  try {
    const dataDir = await tempDataDir('herald-second-host-');
    const config = loadConfig({ DATABASE_URL: fresh.databaseUrl, DATA_DIR: dataDir, PROCESS_ROLE: 'worker', LOG_LEVEL: 'silent' });
    await assert.rejects(startRuntime(config, { log: quiet }), (err: unknown) => {
      assert.ok(err instanceof StartupError);
      assert.equal(
        err.message,
        `JWT_SECRET is not the secret of this database's other Herald processes (this process generated its own into ${dataDir}): give every Herald process of this installation the same JWT_SECRET`,
      );
      return true;
    });

    // Changing the secret on purpose (README § Security): once the record is deleted, the next
    // process records its secret, and a process still running with the old one says so on /health.
    await fresh.ctx.database.pool.query('DELETE FROM installation');
    const runtime = await startRuntime({ ...config, jwtSecret: 'a-new-secret-0123456789abcdef', jwtSecretGenerated: false }, { log: quiet });
    try {
      const stale = await fresh.api.get('/health');
      assert.equal(stale.status, 200);
      assert.deepEqual(stale.body, { status: 'degraded', checks: { database: 'ok', secrets: 'mismatch', disk: 'unwatched' } });
    } finally {
      await runtime.stop();
    }
  } finally {
    await fresh.stop();
  }
});
