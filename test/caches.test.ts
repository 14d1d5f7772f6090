import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type Api, createApi } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';

/**
 * Caches live on each process's context and are evicted in every process at once through
 * LISTEN/NOTIFY: a sender domain deleted or unverified through one process is refused by another
 * on its very next send, not after the cache's TTL (10 s).
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

describe('caches across processes', () => {
  test('a domain deleted in one process is refused for sending in another at once', async () => {
    const d = await verifyDomain(p.sk, dns, 'leaving.test');
    // The second process sends from it, so it has the verified sender cached.
    const before = await send(viaSecond, 'news@leaving.test');
    assert.equal(before.status, 200, before.text);
    assert.equal((await send(viaSecond, 'news@leaving.test')).status, 200);

    assert.equal((await p.sk.delete(`/domains/${d.id}`)).status, 204);
    const refused = await send(viaSecond, 'news@leaving.test');
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.body.error.message, /Domain leaving\.test is not verified/);
  });

  test('a domain verified again after deletion sends again from the other process', async () => {
    const d = await verifyDomain(p.sk, dns, 'returning.test');
    assert.equal((await send(viaSecond, 'hi@returning.test')).status, 200);
    assert.equal((await p.sk.delete(`/domains/${d.id}`)).status, 204);
    assert.equal((await send(viaSecond, 'hi@returning.test')).status, 403);
    await verifyDomain(p.sk, dns, 'returning.test');
    assert.equal((await send(viaSecond, 'hi@returning.test')).status, 200);
  });
});
