import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type Api, createApi } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { createKeyCache } from '../src/http/key-cache.ts';
import pino from 'pino';

/**
 * Caches live on each process's context and are evicted in every process through LISTEN/NOTIFY: a
 * sender domain deleted or unverified through one process is refused by another as soon as
 * PostgreSQL delivers the notification (milliseconds), not after the cache's TTL (10 s). The
 * delivery is asynchronous: on a loaded machine the very next request can still win the race by a
 * few milliseconds, so the tests allow one second (seen once in a full run: 200 on the next send).
 */

let dns: TestDns;
let sink: SmtpSink;
let first: TestServer;
let second: TestServer;
let p: Bootstrapped;
let viaSecond: Api;

before(async () => {
  dns = await startTestDns();
  sink = await startSmtpSink();
  first = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url });
  second = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, PROCESS_ROLE: 'api' }, { databaseUrl: first.databaseUrl });
  p = await bootstrap(first.api, 'two processes');
  viaSecond = createApi(second.url, { key: p.project.secretKey });
});

after(async () => {
  await second?.stop();
  await first?.stop();
  await sink?.stop();
  await dns?.stop();
});

const send = (api: Api, from: string) => api.post('/v1/send', { to: 'reader@example.org', from, subject: 'Hi', body: '<p>Hi</p>' });

/** The second process refuses `from` within a second (the NOTIFY's way), well inside the cache's 10 s. */
async function refusedSoon(from: string) {
  const deadline = Date.now() + 1000;
  for (;;) {
    const res = await send(viaSecond, from);
    if (res.status === 403 || Date.now() > deadline) {
      assert.equal(res.status, 403, res.text);
      return res;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('caches across processes', () => {
  test('a domain deleted in one process is refused for sending in another within a second, not after the 10 s cache', async () => {
    const d = await verifyDomain(p.sk, dns, 'leaving.test');
    // The second process sends from it, so it has the verified sender cached.
    const before = await send(viaSecond, 'news@leaving.test');
    assert.equal(before.status, 200, before.text);
    assert.equal((await send(viaSecond, 'news@leaving.test')).status, 200);

    assert.equal((await p.sk.delete(`/domains/${d.id}`)).status, 204);
    const refused = await refusedSoon('news@leaving.test');
    assert.match(refused.body.error.message, /Domain leaving\.test is not verified/);
  });

  test('a domain verified again after deletion sends again from the other process', async () => {
    const d = await verifyDomain(p.sk, dns, 'returning.test');
    assert.equal((await send(viaSecond, 'hi@returning.test')).status, 200);
    assert.equal((await p.sk.delete(`/domains/${d.id}`)).status, 204);
    await refusedSoon('hi@returning.test');
    await verifyDomain(p.sk, dns, 'returning.test');
    assert.equal((await send(viaSecond, 'hi@returning.test')).status, 200);
  });
});

describe('the API key cache', () => {
  test('a lookup an eviction overtook answers once but is not cached: a key rotated while it was read stops working', async () => {
    const b = await bootstrap(first.api, 'key race');
    const keys = first.ctx.keys;
    // The lookup is under way (its SELECT sent) when the project's eviction arrives, as when a
    // rotation commits between the lookup's read and its answer.
    const lookup = keys.resolve(b.project.secretKey);
    await keys.notifyChanged(b.project.id);
    assert.equal((await lookup)?.projectId, b.project.id, 'the overtaken lookup still answers');
    // The key changes in the database with no notification: only an entry cached above could still answer for it.
    await first.sql(`UPDATE projects SET secret_key_hash = 'rotated-' || id WHERE id = $1`, [b.project.id]);
    assert.equal(await keys.resolve(b.project.secretKey), null, 'the old key is not served from the cache');

    // Without an eviction in between, a lookup is cached as before (the same update then goes unseen until the TTL).
    const c = await bootstrap(first.api, 'key cached');
    assert.equal((await keys.resolve(c.project.secretKey))?.projectId, c.project.id);
    await first.sql(`UPDATE projects SET secret_key_hash = 'rotated-' || id WHERE id = $1`, [c.project.id]);
    assert.equal((await keys.resolve(c.project.secretKey))?.projectId, c.project.id, 'served from the cache');
  });

  test('the cache holds its bound of keys: past it the oldest key is read again, the others are served from the cache', async () => {
    const [a, b, c] = [await bootstrap(first.api, 'bound a'), await bootstrap(first.api, 'bound b'), await bootstrap(first.api, 'bound c')];
    const keys = await createKeyCache(first.ctx.database, first.databaseUrl, pino({ level: 'silent' }), 'test-secret-0123456789abcdef', () => {}, 2);
    try {
      for (const p of [a, b, c]) assert.equal((await keys.resolve(p.project.secretKey))?.projectId, p.project.id);
      // The keys change in the database with no notification: only a cached entry still answers.
      await first.sql(`UPDATE projects SET secret_key_hash = 'rotated-' || id WHERE id = ANY($1)`, [[a, b, c].map((p) => p.project.id)]);
      assert.equal(await keys.resolve(a.project.secretKey), null, 'the oldest of three was dropped for the bound of 2');
      assert.equal((await keys.resolve(b.project.secretKey))?.projectId, b.project.id, 'b is still cached');
      assert.equal((await keys.resolve(c.project.secretKey))?.projectId, c.project.id, 'c is still cached');
    } finally {
      await keys.close();
    }
  });
});
