import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

// The first email on a laptop: no SMTP_URL, no DNS, a sender at the built-in sandbox domain.

describe('sandbox sender in capture mode', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server?.stop());

  test('any address @sandbox.herald.test sends without a domain, captured and DKIM-signed', async () => {
    const { sk } = await bootstrap(server.api);
    const sent = await sk.post('/v1/send', {
      to: 'ada@example.com',
      from: { name: 'Acme', email: 'hello@sandbox.herald.test' },
      subject: 'Hi {{firstName}}',
      body: '<p>Welcome</p>',
      data: { firstName: 'Ada' },
    });
    assert.equal(sent.status, 200, sent.text);
    const id = sent.body.data.emails[0].email;
    const email = await waitForStatus(sk, id, ['DELIVERED', 'FAILED']);
    assert.equal(email.status, 'DELIVERED', email.error);
    const raw = await sk.get(`/emails/${id}/raw`);
    assert.equal(raw.status, 200);
    assert.match(raw.text, /^From: Acme <hello@sandbox\.herald\.test>/m);
    assert.match(raw.text, /^Subject: Hi Ada/m);
    assert.match(raw.text, /DKIM-Signature: [^]*d=sandbox\.herald\.test/);
    assert.match(raw.text, new RegExp(`^Message-ID: <${id}@sandbox\\.herald\\.test>`, 'im'));
  });

  test('templates and campaigns accept the sandbox sender too', async () => {
    const { sk } = await bootstrap(server.api);
    const tpl = await sk.post('/templates', { name: 'Welcome', subject: 'Hi', body: '<p>x</p>', from: 'news@sandbox.herald.test' });
    assert.equal(tpl.status, 201, tpl.text);
  });

  test('the sandbox domain cannot be added as a domain', async () => {
    const { sk } = await bootstrap(server.api);
    for (const domain of ['sandbox.herald.test', 'eu.sandbox.herald.test']) {
      const res = await sk.post('/domains', { domain });
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.error.code, 'CONFLICT');
      assert.match(res.body.error.message, /built-in sandbox sender/);
    }
  });

  test('an unverified domain names both ways out', async () => {
    const { sk } = await bootstrap(server.api);
    const res = await sk.post('/v1/send', { to: 'ada@example.com', from: 'hello@mail.example.com', subject: 's', body: 'b' });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.message, 'Domain mail.example.com is not verified for this project');
    assert.match(res.body.error.suggestion, /publish its DNS records/);
    assert.match(res.body.error.suggestion, /@sandbox\.herald\.test/);
  });

  test('only the sandbox domain itself is built in, not look-alikes', async () => {
    const { sk } = await bootstrap(server.api);
    for (const from of ['a@x.sandbox.herald.test', 'a@sandbox.herald.test.evil.com', 'a@herald.test']) {
      const res = await sk.post('/v1/send', { to: 'ada@example.com', from, subject: 's', body: 'b' });
      assert.equal(res.status, 403, `${from}: ${res.text}`);
    }
  });
});

describe('sandbox sender with SMTP_URL set', () => {
  let env: MailEnv;
  before(async () => {
    env = await startMailEnv();
  });
  after(() => env?.stop());

  test('is refused with a message that says why', async () => {
    const { sk } = await bootstrap(env.server.api);
    const res = await sk.post('/v1/send', { to: 'ada@example.com', from: 'hello@sandbox.herald.test', subject: 's', body: 'b' });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.message, 'The sandbox sender @sandbox.herald.test only works while mail is captured; SMTP_URL is set');
    assert.match(res.body.error.suggestion, /verified/);
    // Only ada's: signing up also sends the account's own verification email through this sink, at a time of its own.
    assert.equal(env.sink.messages.filter((m) => m.envelope.to.includes('ada@example.com')).length, 0);
  });
});
