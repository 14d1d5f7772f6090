import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;

before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

const SK = /^sk_[A-Za-z0-9]{48}$/;

describe('secret API keys are stored hashed', () => {
  test('the database holds no secret key in clear, only a keyed hash and a prefix', async () => {
    const b = await bootstrap(server.api);
    assert.match(b.project.secretKey, SK);
    const [row] = await server.sql<{ json: string; secret_key: string | null; secret_key_hash: string; secret_key_prefix: string }>(
      'SELECT row_to_json(p)::text AS json, secret_key, secret_key_hash, secret_key_prefix FROM projects p WHERE id = $1',
      [b.project.id],
    );
    assert.equal(row.secret_key, null);
    assert.ok(!row.json.includes(b.project.secretKey.slice(3)), 'the key appears nowhere in the row');
    assert.match(row.secret_key_hash, /^[A-Za-z0-9_-]{43}$/);
    // The scheme every stored hash depends on: HMAC-SHA256 of the key under HMAC-SHA256(JWT_SECRET, 'herald api keys v1').
    const hashKey = createHmac('sha256', server.ctx.config.jwtSecret).update('herald api keys v1').digest();
    assert.equal(row.secret_key_hash, createHmac('sha256', hashKey).update(b.project.secretKey).digest('base64url'));
    assert.equal(row.secret_key_prefix, b.project.secretKey.slice(0, 11));
    assert.equal((await b.sk.get('/contacts')).status, 200, 'the key still authenticates');
    assert.equal((await server.api.get('/contacts', { key: row.secret_key_hash })).status, 401, 'the stored hash is not a key');
  });

  test('the full key is shown when created and when rotated; every other response shows its prefix', async () => {
    const b = await bootstrap(server.api);
    const list = await server.api.get('/users/@me/projects', { cookie: b.cookie });
    assert.equal(list.body[0].secretKey, null);
    assert.equal(list.body[0].secretKeyPrefix, b.project.secretKey.slice(0, 11));
    assert.equal(list.body[0].publicKey, b.project.publicKey, 'the public key stays readable');
    const patched = await server.api.patch(`/users/@me/projects/${b.project.id}`, { name: 'Renamed' }, { cookie: b.cookie });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.secretKey, null);
    assert.equal(patched.body.secretKeyPrefix, b.project.secretKey.slice(0, 11));

    const rotated = await server.api.post(`/users/@me/projects/${b.project.id}/regenerate-keys`, undefined, { cookie: b.cookie });
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.secretKey, SK);
    assert.equal(rotated.body.secretKeyPrefix, rotated.body.secretKey.slice(0, 11));
    assert.equal((await server.api.get('/contacts', { key: b.project.secretKey })).status, 401);
    assert.equal((await server.api.get('/contacts', { key: rotated.body.secretKey })).status, 200);
    const after = await server.api.get('/users/@me/projects', { cookie: b.cookie });
    assert.equal(after.body[0].secretKey, null);
    assert.equal(after.body[0].secretKeyPrefix, rotated.body.secretKey.slice(0, 11));
  });

  test('keys stored in clear by an earlier version are hashed at start-up and keep working', async () => {
    const b = await bootstrap(server.api);
    // The row as the previous version left it: the key in clear, no hash.
    await server.sql('UPDATE projects SET secret_key = $2, secret_key_hash = NULL, secret_key_prefix = NULL WHERE id = $1', [
      b.project.id,
      b.project.secretKey,
    ]);
    const upgraded = await startTestServer({ PROCESS_ROLE: 'api' }, { databaseUrl: server.databaseUrl });
    try {
      const [row] = await server.sql<{ secret_key: string | null; secret_key_hash: string | null; secret_key_prefix: string | null }>(
        'SELECT secret_key, secret_key_hash, secret_key_prefix FROM projects WHERE id = $1',
        [b.project.id],
      );
      assert.equal(row.secret_key, null, 'the clear key is gone');
      assert.ok(row.secret_key_hash);
      assert.equal(row.secret_key_prefix, b.project.secretKey.slice(0, 11));
      assert.equal((await upgraded.api.get('/contacts', { key: b.project.secretKey })).status, 200);
      assert.equal((await upgraded.api.post('/v1/track', { email: 'x@example.org', event: 'signup' }, { key: b.project.publicKey })).status, 200);
    } finally {
      await upgraded.stop();
    }
  });
});
