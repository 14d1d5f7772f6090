import assert from 'node:assert/strict';
import { createPublicKey, sign, verify } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { after, before, describe, mock, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { domains } from '../src/db/schema/domains.ts';
import { ApiError } from '../src/http/errors.ts';
import { recheckVerifiedDomainsQueue } from '../src/modules/domains/jobs.ts';
import { senderDomainFor } from '../src/modules/domains/sender.ts';
import { usage as usageOf } from '../src/modules/usage/service.ts';
import { checkDomain } from '../src/modules/domains/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { type DomainRecordEntry, publishRecords, verifyDomain } from './helpers/domains.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let dns: TestDns;
let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address });
  a = await bootstrap(server.api, 'Project A');
  b = await bootstrap(server.api, 'Project B');
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

const dkimOf = (records: DomainRecordEntry[]) => records.find((r) => r.purpose === 'dkim')!;
const publicKeyOf = (dkimValue: string) =>
  createPublicKey({ key: Buffer.from(/p=([A-Za-z0-9+/=]+)$/.exec(dkimValue)![1], 'base64'), format: 'der', type: 'spki' });

async function expectNotVerified(projectId: string, from: string, domain: string) {
  await assert.rejects(senderDomainFor(server.ctx, projectId, from), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.statusCode, 403);
    assert.equal(err.code, 'INTERNAL_SERVER_ERROR');
    assert.equal(err.message, `Domain ${domain} is not verified for this project`);
    return true;
  });
}

describe('adding a domain', () => {
  test('returns the pending domain with its DNS records and a fresh 2048-bit DKIM key', async () => {
    const res = await a.sk.post('/domains', { domain: '  Shop.Example.COM. ' });
    assert.equal(res.status, 201, res.text);
    const d = res.body;
    assert.match(d.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(d.domain, 'shop.example.com');
    assert.equal(d.status, 'pending');
    assert.equal(d.projectId, a.project.id);
    assert.equal(d.verifiedAt, null);
    assert.equal(d.lastCheckedAt, null);
    assert.ok(Math.abs(Date.parse(d.createdAt) - Date.now()) < 60_000);

    assert.deepEqual(
      d.records.map((r: DomainRecordEntry) => [r.purpose, r.type, r.name, r.required]),
      [
        ['dkim', 'TXT', 'herald._domainkey.shop.example.com', true],
        ['spf', 'TXT', 'shop.example.com', false],
        ['dmarc', 'TXT', '_dmarc.shop.example.com', false],
      ],
    );
    assert.ok(
      d.records.every((r: DomainRecordEntry) => !('found' in r)),
      'not checked yet',
    );
    const dkim = dkimOf(d.records);
    assert.match(dkim.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/);
    const key = publicKeyOf(dkim.value);
    assert.equal(key.asymmetricKeyType, 'rsa');
    assert.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
    assert.match(d.records[1].value, /^v=spf1 \S+ ~all$/);
    assert.equal(d.records[2].value, 'v=DMARC1; p=none;');

    // The private half is stored encrypted, never as a PEM.
    const [row] = await server.sql<{ dkim_private_key_enc: string; dkim_selector: string }>(
      'SELECT dkim_private_key_enc, dkim_selector FROM domains WHERE id = $1',
      [d.id],
    );
    assert.equal(row.dkim_selector, 'herald');
    assert.ok(!Buffer.from(row.dkim_private_key_enc, 'base64').toString('latin1').includes('PRIVATE KEY'));
  });

  test('every domain gets its own key', async () => {
    const one = await a.sk.post('/domains', { domain: 'one-key.example' });
    const two = await a.sk.post('/domains', { domain: 'two-key.example' });
    assert.notEqual(dkimOf(one.body.records).value, dkimOf(two.body.records).value);
  });

  test('the same domain twice in a project is 409, in another project it is allowed', async () => {
    assert.equal((await a.sk.post('/domains', { domain: 'twice.example' })).status, 201);
    const again = await a.sk.post('/domains', { domain: 'TWICE.example.' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'CONFLICT');
    assert.match(again.body.error.message, /twice\.example/);
    const other = await b.sk.post('/domains', { domain: 'twice.example' });
    assert.equal(other.status, 201);
    assert.equal(other.body.projectId, b.project.id);
  });

  test('invalid domain names are 422 on the domain field', async () => {
    const bad = [
      'localhost',
      '1.2.3.4',
      '::1',
      '[::1]',
      `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(60)}.com`,
      // fits in 253 characters, but its DKIM record name herald._domainkey.<domain> would not
      `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(55)}.com`,
      `${'a'.repeat(64)}.com`,
      '-bad.com',
      'bad-.com',
      'under_score.com',
      'exa mple.com',
      'http://example.com',
      'user@example.com',
      '*.example.com',
      'example..com',
      '.example.com',
      '',
    ];
    for (const domain of bad) {
      const res = await a.sk.post('/domains', { domain });
      assert.equal(res.status, 422, `${domain}: ${res.text}`);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.equal(res.body.error.errors[0].field, 'domain');
      assert.equal(res.body.error.errors[0].code, 'invalid_string');
    }
    const missing = await a.sk.post('/domains', {});
    assert.equal(missing.status, 422);
    assert.deepEqual([missing.body.error.errors[0].field, missing.body.error.errors[0].code], ['domain', 'invalid_type']);
  });

  test('internationalised names are stored as punycode', async () => {
    const res = await a.sk.post('/domains', { domain: 'Bücher.example' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.domain, 'xn--bcher-kva.example');
    assert.equal(dkimOf(res.body.records).name, 'herald._domainkey.xn--bcher-kva.example');
  });

  test('needs a secret key', async () => {
    assert.equal((await server.api.post('/domains', { domain: 'nokey.example' })).status, 401);
    const pk = await a.pk.post('/domains', { domain: 'nokey.example' });
    assert.equal(pk.status, 401);
    assert.equal(pk.body.error.code, 'INVALID_API_KEY');
  });
});

describe('verification through DNS', () => {
  test('missing records leave the domain pending with found:false; published ones verify it', async () => {
    const added = await a.sk.post('/domains', { domain: 'verify-me.example' });
    const first = await a.sk.get(`/domains/${added.body.id}/verify`);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.status, 'pending');
    assert.equal(first.body.verifiedAt, null);
    assert.ok(first.body.lastCheckedAt);
    assert.deepEqual(
      first.body.records.map((r: DomainRecordEntry) => r.found),
      [false, false, false],
    );

    // Only the required DKIM record: verified, the advisory ones reported as not found.
    dns.set(dkimOf(added.body.records).name, 'TXT', [dkimOf(added.body.records).value]);
    const second = await a.sk.get(`/domains/${added.body.id}/verify`);
    assert.equal(second.body.status, 'verified');
    assert.ok(Math.abs(Date.parse(second.body.verifiedAt) - Date.now()) < 60_000);
    assert.deepEqual(
      second.body.records.map((r: DomainRecordEntry) => [r.purpose, r.found]),
      [
        ['dkim', true],
        ['spf', false],
        ['dmarc', false],
      ],
    );

    // The DKIM value is longer than 255 bytes, so DNS carries it as several strings.
    const resolver = new Resolver();
    resolver.setServers([dns.address]);
    const [chunks] = await resolver.resolveTxt(dkimOf(added.body.records).name);
    assert.ok(chunks.length >= 2, `expected a split TXT record, got ${chunks.length} string(s)`);
    assert.equal(chunks.join(''), dkimOf(added.body.records).value);

    // SPF merged into an existing record and any DMARC policy count as found.
    const spfValue = added.body.records[1].value as string;
    const mechanism = spfValue.split(' ')[1];
    dns.set('verify-me.example', 'TXT', ['google-site-verification=abc', `v=spf1 include:_spf.google.com ${mechanism} -all`]);
    dns.set('_dmarc.verify-me.example', 'TXT', ['v=DMARC1; p=reject; rua=mailto:d@verify-me.example']);
    const third = await a.sk.get(`/domains/${added.body.id}/verify`);
    assert.deepEqual(
      third.body.records.map((r: DomainRecordEntry) => r.found),
      [true, true, true],
    );
    assert.equal(third.body.verifiedAt, second.body.verifiedAt, 'verifiedAt keeps the first verification');

    const list = await a.sk.get(`/domains/project/${a.project.id}`);
    const listed = list.body.find((d: { id: string }) => d.id === added.body.id);
    assert.equal(listed.status, 'verified');
    assert.deepEqual(listed.records, third.body.records);
  });

  test('a DKIM record with a different key, or whitespace-wrapped, is judged on the key', async () => {
    const added = await a.sk.post('/domains', { domain: 'wrong-key.example' });
    const other = await a.sk.post('/domains', { domain: 'other-key.example' });
    const name = dkimOf(added.body.records).name;
    dns.set(name, 'TXT', [dkimOf(other.body.records).value]);
    const wrong = await a.sk.get(`/domains/${added.body.id}/verify`);
    assert.equal(wrong.body.status, 'pending');
    assert.equal(dkimOf(wrong.body.records).found, false);

    // Providers reformat: extra spaces, no k= (rsa is the default), p= wrapped.
    const p = /p=(.+)$/.exec(dkimOf(added.body.records).value)![1];
    dns.set(name, 'TXT', [`v=DKIM1;  p=${p.slice(0, 100)} ${p.slice(100)} `]);
    const reformatted = await a.sk.get(`/domains/${added.body.id}/verify`);
    assert.equal(reformatted.body.status, 'verified');
  });

  test('verifyDomain helper verifies through the published records', async () => {
    const d = await verifyDomain(a.sk, dns, 'helper.example');
    assert.equal(d.status, 'verified');
    assert.deepEqual(
      d.records.map((r: DomainRecordEntry) => r.found),
      [true, true, true],
    );
  });

  test('the daily recheck turns a verified domain whose DKIM record was removed back to pending', async () => {
    const kept = await verifyDomain(a.sk, dns, 'kept.example');
    const lost = await verifyDomain(a.sk, dns, 'lost.example');
    dns.remove(dkimOf(lost.records).name, 'TXT');

    await recheckVerifiedDomainsQueue.handler(server.ctx, {}, { id: 'test' });

    const list = await a.sk.get(`/domains/project/${a.project.id}`);
    const byId = new Map(list.body.map((d: { id: string }) => [d.id, d]));
    const lostNow = byId.get(lost.id) as { status: string; verifiedAt: string | null; records: DomainRecordEntry[] };
    assert.equal(lostNow.status, 'pending');
    assert.equal(lostNow.verifiedAt, null);
    assert.equal(dkimOf(lostNow.records).found, false);
    assert.equal((byId.get(kept.id) as { status: string }).status, 'verified');
    await expectNotVerified(a.project.id, 'news@lost.example', 'lost.example');
  });

  test('a DNS outage does not unverify a domain', async () => {
    const d = await verifyDomain(a.sk, dns, 'outage.example');
    const dead = new Resolver({ timeout: 200, tries: 1 });
    dead.setServers(['127.0.0.1:1']);
    const [stored] = await server.ctx.database.db.select().from(domains).where(eq(domains.id, d.id));
    const checked = await checkDomain({ ...server.ctx, dns: dead }, stored);
    assert.equal(checked.status, 'verified');
    assert.equal(dkimOf(checked.records).found, false);
  });

  test('the pending job, run by the workers, verifies domains whose records appeared', async () => {
    const added = await a.sk.post('/domains', { domain: 'background.example' });
    publishRecords(dns, added.body.records);
    await server.ctx.jobs.send('domains-verify-pending', {});
    let status = 'pending';
    for (let i = 0; i < 100 && status !== 'verified'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const [row] = await server.sql<{ status: string }>('SELECT status FROM domains WHERE id = $1', [added.body.id]);
      status = row.status;
    }
    assert.equal(status, 'verified');
  });

  test('both checks are scheduled: pending every 5 minutes, verified daily', async () => {
    const rows = await server.sql<{ name: string; cron: string }>("SELECT name, cron FROM pgboss.schedule WHERE name LIKE 'domains-%' ORDER BY name");
    assert.deepEqual(
      rows.map((r) => [r.name, r.cron]),
      [
        ['domains-recheck-verified', '17 3 * * *'],
        ['domains-verify-pending', '*/5 * * * *'],
      ],
    );
  });

  test('verify of an unknown or foreign domain is 404', async () => {
    const foreign = await b.sk.post('/domains', { domain: 'foreign.example' });
    for (const id of [foreign.body.id, '0190a5c4-0000-7000-8000-000000000000', 'not-a-uuid']) {
      const res = await a.sk.get(`/domains/${id}/verify`);
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'DOMAIN_NOT_FOUND');
      assert.deepEqual(res.body.error.details, { resource: 'domain', id });
    }
  });
});

describe('the sender check', () => {
  test('a verified domain signs for itself and its subdomains, with the key it published', async () => {
    const d = await verifyDomain(a.sk, dns, 'brand.example');
    for (const from of ['hello@brand.example', 'Hello@BRAND.example', 'news@mail.eu.brand.example']) {
      const sender = await senderDomainFor(server.ctx, a.project.id, from);
      assert.deepEqual([sender.id, sender.domain, sender.dkimSelector], [d.id, 'brand.example', 'herald']);
    }
    const sender = await senderDomainFor(server.ctx, a.project.id, 'hello@brand.example');
    const data = Buffer.from('DKIM-Signature input');
    const signature = sign('sha256', data, sender.dkimPrivateKeyPem);
    assert.ok(verify('sha256', data, publicKeyOf(dkimOf(d.records).value), signature));
  });

  test('the most specific verified domain is used', async () => {
    await verifyDomain(a.sk, dns, 'mail.brand.example');
    const sender = await senderDomainFor(server.ctx, a.project.id, 'x@eu.mail.brand.example');
    assert.equal(sender.domain, 'mail.brand.example');
  });

  test('unverified, pending, look-alike and other projects\u2019 domains are 403 naming the domain', async () => {
    await a.sk.post('/domains', { domain: 'pending-only.example' });
    await expectNotVerified(a.project.id, 'x@pending-only.example', 'pending-only.example');
    await expectNotVerified(a.project.id, 'x@nowhere.example', 'nowhere.example');
    await expectNotVerified(a.project.id, 'x@notbrand.example', 'notbrand.example');
    await expectNotVerified(b.project.id, 'x@brand.example', 'brand.example');
  });
});

describe('listing and deleting', () => {
  test('lists the project\u2019s domains, newest first; another project is 404', async () => {
    const c = await bootstrap(server.api, 'Project C');
    const first = await c.sk.post('/domains', { domain: 'first.example' });
    await verifyDomain(c.sk, dns, 'second.example');
    const list = await c.sk.get(`/domains/project/${c.project.id}`);
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.map((d: { domain: string; status: string }) => [d.domain, d.status]),
      [
        ['second.example', 'verified'],
        ['first.example', 'pending'],
      ],
    );
    assert.deepEqual(list.body[1], first.body);

    // Cookie + X-Project-Id works the same.
    const viaCookie = await server.api.get(`/domains/project/${c.project.id}`, {
      cookie: c.cookie,
      headers: { 'x-project-id': c.project.id },
    });
    assert.equal(viaCookie.status, 200);
    assert.equal(viaCookie.body.length, 2);

    for (const id of [a.project.id, 'prj_doesnotexist']) {
      const res = await c.sk.get(`/domains/project/${id}`);
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'PROJECT_NOT_FOUND');
    }
  });

  test('DELETE removes the domain and its sender rights', async () => {
    const d = await verifyDomain(a.sk, dns, 'goodbye.example');
    await senderDomainFor(server.ctx, a.project.id, 'x@goodbye.example');
    const foreign = await b.sk.delete(`/domains/${d.id}`);
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'DOMAIN_NOT_FOUND');

    const res = await a.sk.delete(`/domains/${d.id}`);
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    const list = await a.sk.get(`/domains/project/${a.project.id}`);
    assert.ok(!list.body.some((x: { id: string }) => x.id === d.id));
    assert.equal((await a.sk.get(`/domains/${d.id}/verify`)).status, 404);
    assert.equal((await a.sk.delete(`/domains/${d.id}`)).status, 404);
    await expectNotVerified(a.project.id, 'x@goodbye.example', 'goodbye.example');
    // Re-adding is allowed and gives a new key.
    const again = await a.sk.post('/domains', { domain: 'goodbye.example' });
    assert.equal(again.status, 201);
    assert.notEqual(dkimOf(again.body.records).value, dkimOf(d.records).value);
  });

  test('DELETE is 409 while a registered sender-usage check reports a user', async () => {
    const d = await verifyDomain(a.sk, dns, 'in-use.example');
    const real = usageOf.domainSender;
    const check = mock.method(usageOf, 'domainSender', async (...args: Parameters<typeof real>) => {
      const [, projectId, domain] = args;
      return projectId === a.project.id && domain === 'in-use.example' ? 'template "Welcome"' : real(...args);
    });
    try {
      const res = await a.sk.delete(`/domains/${d.id}`);
      assert.equal(res.status, 409);
      assert.equal(res.body.error.code, 'CONFLICT');
      assert.match(res.body.error.message, /in-use\.example.*template "Welcome"/);
      assert.deepEqual(res.body.error.details, { domain: 'in-use.example', usedBy: 'template "Welcome"' });
    } finally {
      check.mock.restore();
    }
    assert.equal((await a.sk.delete(`/domains/${d.id}`)).status, 204);
  });
});

describe('domains per project', () => {
  test('at most 50: concurrent adds stop exactly there (403 with details.limit), and deleting one makes room', async () => {
    const p = await bootstrap(server.api, 'Many domains');
    const answers = await Promise.all(Array.from({ length: 55 }, (_, i) => p.sk.post('/domains', { domain: `d${i}.many.test` })));
    assert.deepEqual(answers.map((r) => r.status).sort(), [...Array(50).fill(201), ...Array(5).fill(403)]);
    const refused = answers.find((r) => r.status === 403)!;
    assert.equal(refused.body.error.code, 'FORBIDDEN');
    assert.deepEqual(refused.body.error.details, { limit: 50 });
    const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM domains WHERE project_id = $1', [p.project.id]);
    assert.equal(n, 50);
    const added = answers.find((r) => r.status === 201)!;
    assert.equal((await p.sk.delete(`/domains/${added.body.id}`)).status, 204);
    assert.equal((await p.sk.post('/domains', { domain: 'one-more.many.test' })).status, 201);
  });
});
