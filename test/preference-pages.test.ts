import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { signLinkToken } from '../src/render/link-tokens.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

// The pages a recipient sees name who sends the emails, and an unsubscribe can be undone.

let server: TestServer;
let sink: SmtpSink;
let b: Bootstrapped;
let contactId: string;
before(async () => {
  sink = await startSmtpSink();
  server = await startTestServer({ SMTP_URL: sink.url, PUBLIC_URL: 'https://herald.example.test' });
  b = await bootstrap(server.api, 'Acme <Newsletter>');
  const created = await b.sk.post('/contacts', { email: 'ada@example.com' });
  assert.ok(created.status === 200 || created.status === 201, created.text);
  contactId = created.body.id ?? created.body.data?.id;
});
after(async () => {
  await server?.stop();
  await sink?.stop();
});

const SIX_YEARS_AGO = Date.now() - 6 * 365 * 24 * 3600 * 1000;
const link = (action: 'unsubscribe' | 'subscribe' | 'manage', signedAt = Date.now()) =>
  `/${action}/${signLinkToken(server.ctx.config.jwtSecret, { projectId: b.project.id, contactId, action }, signedAt)}`;
const form = { raw: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
const subscribed = async () => (await b.sk.get(`/contacts/${contactId}`)).body.subscribed;

test('every page names the project (escaped)', async () => {
  for (const action of ['unsubscribe', 'subscribe', 'manage'] as const) {
    const res = await server.api.get(link(action));
    assert.equal(res.status, 200);
    assert.match(res.text, /<p class="sender">Acme &lt;Newsletter&gt;<\/p>/, action);
  }
});

test("a contact's locale naming a member of Object is unknown: the pages are in English", async () => {
  // The public key's /v1/track may set any locale; `constructor` once found Object's constructor (500).
  for (const locale of ['constructor', '__proto__', 'toString', 'hasOwnProperty-x']) {
    const tracked = await b.pk.post('/v1/track', { email: 'ada@example.com', event: 'locale', data: { locale } });
    assert.equal(tracked.status, 200, tracked.text);
    for (const action of ['unsubscribe', 'subscribe', 'manage'] as const) {
      const res = await server.api.get(link(action));
      assert.equal(res.status, 200, `${locale} ${action}: ${res.text.slice(0, 200)}`);
      assert.match(
        res.text,
        { unsubscribe: /<title>Unsubscribe/, subscribe: /<title>Subscribe/, manage: /<title>Email preferences/ }[action],
        `${locale} ${action}`,
      );
    }
  }
  await b.pk.post('/v1/track', { email: 'ada@example.com', event: 'locale', data: { locale: null } });
});

test('the unsubscribed page offers to resubscribe, and that works', async () => {
  const done = await server.api.request('POST', link('unsubscribe'), form);
  assert.equal(done.status, 200);
  assert.equal(await subscribed(), false);
  assert.match(done.text, /ada@example\.com has been unsubscribed\./);
  assert.match(done.text, /<p class="sender">Acme &lt;Newsletter&gt;<\/p>/);
  const action = /<form method="post" action="([^"]+)"><button type="submit">Subscribe again<\/button>/.exec(done.text)?.[1];
  assert.ok(action?.startsWith('/subscribe/'), done.text);
  const again = await server.api.request('POST', action!, form);
  assert.equal(again.status, 200);
  assert.equal(await subscribed(), true);
});

const mailsTo = (to: string) => sink.messages.filter((m) => m.envelope.to.includes(to) && String(m.parsed.subject).startsWith('Your link'));
const freshLink = (token: string, email: string) =>
  server.api.request('POST', '/fresh-link', {
    raw: new URLSearchParams({ token, email }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });

test('an expired link names the project and offers a fresh link by email; a forged one offers nothing', async () => {
  for (const action of ['unsubscribe', 'subscribe', 'manage'] as const) {
    const res = await server.api.get(link(action, SIX_YEARS_AGO));
    assert.equal(res.status, 404, action);
    assert.match(res.text, /<p class="sender">Acme &lt;Newsletter&gt;<\/p><h1>This link no longer works<\/h1>/, action);
    const token = link(action, SIX_YEARS_AGO).split('/')[2];
    assert.ok(
      res.text.includes(
        `<form method="post" action="/fresh-link"><input type="hidden" name="token" value="${token}"><label for="email">Email address</label><input id="email" type="email" name="email" required maxlength="254" autocomplete="email"><button type="submit">Send me a fresh link</button></form>`,
      ),
      res.text,
    );
  }
  const valid = link('manage');
  const forged = valid.slice(0, -4) + (valid.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  const bad = await server.api.get(forged);
  assert.equal(bad.status, 404);
  assert.match(bad.text, /This link is not valid\. Check that it was copied in full/);
  assert.doesNotMatch(bad.text, /<form|Acme/);
  const badPost = await freshLink(forged.split('/')[2], 'ada@example.com');
  assert.equal(badPost.status, 404);
  assert.doesNotMatch(badPost.text, /<form|Acme/);
});

test('the fresh-link form answers the same for a contact and a stranger, and mails only the contact', async () => {
  const expired = link('unsubscribe', SIX_YEARS_AGO).split('/')[2];
  const known = await freshLink(expired, ' ADA@example.com ');
  const unknown = await freshLink(expired, 'stranger@example.com');
  assert.equal(known.status, 200);
  assert.equal(unknown.status, 200);
  assert.equal(known.text, unknown.text);
  assert.match(known.text, /If this address receives our emails, a fresh link is on its way\./);

  const deadline = Date.now() + 10_000;
  while (mailsTo('ada@example.com').length === 0) {
    assert.ok(Date.now() < deadline, 'the fresh link was mailed');
    await new Promise((r) => setTimeout(r, 100));
  }
  const [mail] = mailsTo('ada@example.com');
  assert.equal(mail.parsed.subject, 'Your link to manage emails from Acme <Newsletter>');
  const manage = /https:\/\/herald\.example\.test(\/manage\/[\w.-]+)/.exec(String(mail.parsed.html))?.[1];
  assert.ok(manage, String(mail.parsed.html));
  const page = await server.api.get(manage);
  assert.equal(page.status, 200);
  assert.match(page.text, /ada@example\.com (receives|does not receive) marketing emails\./);

  // A second request within five minutes answers the same and sends nothing more.
  assert.equal((await freshLink(expired, 'ada@example.com')).text, known.text);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(mailsTo('ada@example.com').length, 1);
  assert.equal(sink.messages.filter((m) => m.envelope.to.includes('stranger@example.com')).length, 0);
});

test('the fresh-link form is rate limited per address, known or not', async () => {
  const expired = link('manage', SIX_YEARS_AGO).split('/')[2];
  const statuses: number[] = [];
  // Ten requests an hour per address (slowed down after three), then 429 for an hour.
  for (let i = 0; i < 10; i++) statuses.push((await freshLink(expired, 'limited@example.com')).status);
  assert.deepEqual(statuses, Array(10).fill(200));
  const limited = await freshLink(expired, 'limited@example.com');
  assert.equal(limited.status, 429);
  assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
  assert.match(limited.text, /Too many requests\. Please try again in a few minutes\./);
});
