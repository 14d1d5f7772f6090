import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import argon2 from 'argon2';
import { ApiError } from '../src/http/errors.ts';
import { hashSlots } from '../src/modules/auth/password.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

/** `$argon2id$v=19$m=19456,p=1,t=2$salt$hash` → { type: 'argon2id', m: 19456, t: 2, p: 1 } */
function paramsOf(digest: string) {
  const [, type, , params] = digest.split('$');
  return { type, ...Object.fromEntries(params.split(',').map((kv) => [kv.split('=')[0], Number(kv.split('=')[1])])) };
}
const OWASP = { type: 'argon2id', m: 7 * 1024, t: 5, p: 1 };
const storedHash = async (email: string) =>
  (await server.sql<{ password_hash: string }>(`SELECT password_hash FROM users WHERE email = $1`, [email]))[0].password_hash;

describe('password hashes', () => {
  test('a new password is stored with argon2id at m=7 MiB, t=5, p=1', async () => {
    const email = `params-${Date.now()}@example.org`;
    assert.equal((await server.api.post('/auth/signup', { email, password: 'long enough pw' })).status, 201);
    assert.deepEqual(paramsOf(await storedHash(email)), OWASP);
  });

  test("a hash made with argon2's defaults still signs in, and is re-hashed with the current parameters", async () => {
    const email = `legacy-${Date.now()}@example.org`;
    assert.equal((await server.api.post('/auth/signup', { email, password: 'first password' })).status, 201);
    const legacy = await argon2.hash('legacy password', { type: argon2.argon2id });
    assert.deepEqual(paramsOf(legacy), { type: 'argon2id', m: 65536, t: 3, p: 4 });
    await server.sql(`UPDATE users SET password_hash = $1 WHERE email = $2`, [legacy, email]);

    assert.equal((await server.api.post('/auth/login', { email, password: 'first password' })).status, 401);
    assert.equal(await storedHash(email), legacy, 'a wrong password changes nothing');
    assert.equal((await server.api.post('/auth/login', { email, password: 'legacy password' })).status, 200);
    const upgraded = await storedHash(email);
    assert.deepEqual(paramsOf(upgraded), OWASP);
    assert.equal(await argon2.verify(upgraded, 'legacy password'), true);
    assert.equal((await server.api.post('/auth/login', { email, password: 'legacy password' })).status, 200);
  });
});

describe('hash slots', () => {
  test('at most 2 hashes run at once and 3 wait; the rest are refused with 429 and retryAfter', async () => {
    const slots = hashSlots(2, 3);
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    const gates: (() => void)[] = [];
    const work = (i: number) => async () => {
      started.push(i);
      peak = Math.max(peak, ++running);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
      return i;
    };
    const outcomes = Array.from({ length: 8 }, (_, i) =>
      slots.run(work(i)).then(
        (v) => ({ done: v }),
        (err: unknown) => ({ err }),
      ),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1], 'two run, the others wait');
    // Finish the running ones, one at a time, until every admitted task has run.
    while (gates.length > 0) {
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    const results = await Promise.all(outcomes);
    assert.equal(peak, 2);
    assert.deepEqual(started, [0, 1, 2, 3, 4], 'the waiting ones run in arrival order');
    assert.deepEqual(
      results.slice(0, 5).map((r) => ('done' in r ? r.done : null)),
      [0, 1, 2, 3, 4],
    );
    for (const r of results.slice(5)) {
      assert.ok('err' in r && r.err instanceof ApiError);
      assert.equal(r.err.statusCode, 429);
      assert.equal(r.err.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(r.err.details, { retryAfter: 1 });
    }
    // The slots are free again.
    assert.equal(await slots.run(async () => 'again'), 'again');
  });
});
