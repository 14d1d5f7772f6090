import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { deliverEmail } from '../src/modules/emails/delivery/index.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type SmtpSink, dkimResult } from './helpers/smtp-sink.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';
import { waitFor } from './helpers/workflows.ts';

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;
const FROM = 'news@mail.example.test';

before(async () => {
  ({ dns, sink, server } = await startMailEnv());
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'mail.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

async function template(type: string, body = '<html><body><p>Hi {{firstName ?? "there"}}</p></body></html>') {
  const res = await b.sk.post('/templates', { name: `${type} t`, subject: 'News for {{firstName ?? "you"}}', body, from: FROM, type });
  assert.equal(res.status, 201, res.text);
  return res.body.id as string;
}

const messageTo = (address: string) => sink.messages.find((m) => m.envelope.to.includes(address));

/** A header as it stands in the raw message, unfolded (mailparser regroups List-* headers). */
function rawHeader(raw: Buffer, name: string): string | undefined {
  const head = raw
    .toString()
    .split('\r\n\r\n')[0]
    .replace(/\r\n[ \t]+/g, ' ');
  const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

describe('marketing mail is compliant', () => {
  test('MARKETING: one-click List-Unsubscribe headers, Precedence bulk and an English footer', async () => {
    const id = await template('MARKETING');
    const res = await b.sk.post('/v1/send', { to: 'm1@example.org', template: id, subscribed: true, data: { firstName: 'Mia' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.emails[0].status, 'QUEUED');
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const msg = messageTo('m1@example.org')!;
    assert.equal(msg.parsed.subject, 'News for Mia');
    const listUnsub = rawHeader(msg.raw, 'List-Unsubscribe') ?? '';
    // HTTPS only: no mailto: until inbound mail exists to act on it (docs/decisions.md).
    assert.match(listUnsub, /^<http:\/\/localhost:0\/unsubscribe\/[\w.-]+>$/);
    assert.equal(rawHeader(msg.raw, 'List-Unsubscribe-Post'), 'List-Unsubscribe=One-Click');
    assert.equal(rawHeader(msg.raw, 'Precedence'), 'bulk');
    assert.match(String(msg.parsed.html), /You are receiving this email because you subscribed[\s\S]*Unsubscribe<\/a>/);
    assert.ok(String(msg.parsed.html).indexOf('Unsubscribe</a>') < String(msg.parsed.html).indexOf('</body>'), 'footer sits inside the body');
    const dkim = await dkimResult(msg.raw, dns.address);
    assert.equal(dkim.result, 'pass', `DKIM ${dkim.result}: ${dkim.why}\n${msg.raw.toString('latin1').slice(0, 4000)}`);
  });

  test('the footer follows the contact locale, and is left out when the body places {{unsubscribeUrl}}', async () => {
    const id = await template('MARKETING');
    const de = await b.sk.post('/v1/send', { to: 'de@example.org', template: id, subscribed: true, data: { locale: 'de-AT' } });
    // A locale naming a member of Object (set through the public key's /v1/track) is unknown, so English.
    const odd = await b.sk.post('/v1/send', { to: 'odd@example.org', template: id, subscribed: true, data: { locale: 'constructor' } });
    const own = await template('MARKETING', '<p>Bye: <a href="{{unsubscribeUrl}}">leave</a></p>');
    const placed = await b.sk.post('/v1/send', { to: 'own@example.org', template: own, subscribed: true });
    await waitForStatus(b.sk, de.body.data.emails[0].email, ['SENT']);
    await waitForStatus(b.sk, placed.body.data.emails[0].email, ['SENT']);
    await waitForStatus(b.sk, odd.body.data.emails[0].email, ['SENT']);
    assert.match(String(messageTo('de@example.org')!.parsed.html), /Sie erhalten diese E-Mail[\s\S]*Abmelden/);
    assert.match(String(messageTo('odd@example.org')!.parsed.html), /You are receiving this email because you subscribed[\s\S]*Unsubscribe<\/a>/);
    const ownHtml = String(messageTo('own@example.org')!.parsed.html);
    assert.doesNotMatch(ownHtml, /You are receiving this email/);
    assert.match(ownHtml, /<a href="http:\/\/localhost:0\/unsubscribe\/[\w.-]+">leave<\/a>/);
  });

  test('the footer names the project, and prints its postal address once set', async () => {
    const id = await template('MARKETING');
    const before = await b.sk.post('/v1/send', { to: 'addr0@example.org', template: id, subscribed: true });
    await waitForStatus(b.sk, before.body.data.emails[0].email, ['SENT']);
    assert.match(String(messageTo('addr0@example.org')!.parsed.html), /Unsubscribe<\/a><p style="margin:8px 0 0">Test project<\/p><\/div>/);

    const patched = await server.api.patch(
      `/users/@me/projects/${b.project.id}`,
      { postalAddress: ' Acme & Co\n1 Main St, Springfield ' },
      { cookie: b.cookie },
    );
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.postalAddress, 'Acme & Co\n1 Main St, Springfield');
    const listed = await server.api.get('/users/@me/projects', { cookie: b.cookie });
    assert.equal(listed.body.find((p: { id: string }) => p.id === b.project.id).postalAddress, 'Acme & Co\n1 Main St, Springfield');
    const after = await b.sk.post('/v1/send', { to: 'addr1@example.org', template: id, subscribed: true });
    await waitForStatus(b.sk, after.body.data.emails[0].email, ['SENT']);
    const msg = messageTo('addr1@example.org')!;
    assert.match(String(msg.parsed.html), /<p style="margin:8px 0 0">Test project<br>Acme &amp; Co<br>1 Main St, Springfield<\/p>/);
    assert.match(String(msg.parsed.text), /Acme & Co\s+1 Main St, Springfield/);

    const tooLong = await server.api.patch(`/users/@me/projects/${b.project.id}`, { postalAddress: 'x'.repeat(501) }, { cookie: b.cookie });
    assert.equal(tooLong.status, 422, tooLong.text);
    const cleared = await server.api.patch(`/users/@me/projects/${b.project.id}`, { postalAddress: '' }, { cookie: b.cookie });
    assert.equal(cleared.body.postalAddress, null);
  });

  test('HEADLESS gets the headers but no footer; TRANSACTIONAL reaches unsubscribed contacts', async () => {
    const headless = await template('HEADLESS');
    const h = await b.sk.post('/v1/send', { to: 'h@example.org', template: headless, subscribed: true });
    await waitForStatus(b.sk, h.body.data.emails[0].email, ['SENT']);
    const hm = messageTo('h@example.org')!;
    assert.equal(rawHeader(hm.raw, 'List-Unsubscribe-Post'), 'List-Unsubscribe=One-Click');
    assert.doesNotMatch(String(hm.parsed.html), /You are receiving this email/);

    const t = await b.sk.post('/v1/send', { to: 'unsub@example.org', from: FROM, subject: 'receipt', body: 'r', subscribed: false });
    assert.equal(t.body.data.emails[0].status, 'QUEUED');
    await waitForStatus(b.sk, t.body.data.emails[0].email, ['SENT']);
  });

  test('MARKETING to an unsubscribed contact is SKIPPED and never sent', async () => {
    const id = await template('MARKETING');
    const res = await b.sk.post('/v1/send', { to: 'nope@example.org', template: id });
    const item = res.body.data.emails[0];
    assert.equal(item.status, 'SKIPPED');
    const email = await b.sk.get(`/emails/${item.email}`);
    assert.equal(email.body.status, 'SKIPPED');
    assert.equal(email.body.error, 'unsubscribed');
    assert.equal(messageTo('nope@example.org'), undefined);
  });

  test('a template with explicit-field overrides: subject and from of the request win', async () => {
    const id = await template('TRANSACTIONAL');
    await verifyDomain(b.sk, dns, 'alt.example.test');
    const res = await b.sk.post('/v1/send', {
      to: 'ovr@example.org',
      template: id,
      subject: 'Overridden {{firstName}}',
      from: 'x@alt.example.test',
      data: { firstName: 'Olga' },
    });
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const msg = messageTo('ovr@example.org')!;
    assert.equal(msg.parsed.subject, 'Overridden Olga');
    assert.equal(msg.parsed.from?.value[0].address, 'x@alt.example.test');
    assert.match(String(msg.parsed.html), /Hi Olga/, 'the body still comes from the template');
    assert.equal((await dkimResult(msg.raw, dns.address)).domain, 'alt.example.test');
  });
});

describe('unsubscribe, subscribe and manage pages', () => {
  const linkFrom = (html: string, action: string) => {
    const m = new RegExp(`http://localhost:0(/${action}/[\\w.-]+)`).exec(html);
    assert.ok(m, `no ${action} link`);
    return m[1];
  };

  test('one-click POST unsubscribes at once and records the event; the GET page has a form and no script', async () => {
    const id = await template('MARKETING', '<p>{{unsubscribeUrl}} {{manageUrl}} {{subscribeUrl}}</p>');
    const res = await b.sk.post('/v1/send', { to: 'pages@example.org', template: id, subscribed: true });
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const html = String(messageTo('pages@example.org')!.parsed.html);
    const unsubscribe = linkFrom(html, 'unsubscribe');
    assert.doesNotMatch(unsubscribe, new RegExp(res.body.data.emails[0].contact.id), 'no bare contact id in the URL');

    const page = await server.api.get(unsubscribe);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.text, /<form method="post"/);
    assert.doesNotMatch(page.text, /<script/i);
    assert.match(page.text, /pages@example\.org/);

    const click = await server.api.request('POST', unsubscribe, {
      raw: 'List-Unsubscribe=One-Click',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(click.status, 200);
    const contactId = res.body.data.emails[0].contact.id;
    assert.equal((await b.sk.get(`/contacts/${contactId}`)).body.subscribed, false);
    const events = await server.sql<{ name: string }>(`SELECT name FROM events WHERE contact_id = $1 AND name LIKE 'contact.%'`, [contactId]);
    assert.deepEqual(
      events.map((e) => e.name).filter((n) => n === 'contact.unsubscribed'),
      ['contact.unsubscribed'],
    );

    const subscribe = linkFrom(html, 'subscribe');
    assert.equal((await server.api.request('POST', subscribe, { raw: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status, 200);
    assert.equal((await b.sk.get(`/contacts/${contactId}`)).body.subscribed, true);

    const manage = linkFrom(html, 'manage');
    const managePage = await server.api.get(manage);
    assert.match(managePage.text, /receives marketing emails/);
    const toggled = await server.api.request('POST', manage, { raw: 'subscribed=false', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.match(toggled.text, /does not receive marketing emails/);
    assert.equal((await b.sk.get(`/contacts/${contactId}`)).body.subscribed, false);
  });

  test('a tampered token or one for another action is a 404 page and changes nothing', async () => {
    const id = await template('MARKETING', '<p>{{unsubscribeUrl}}</p>');
    const res = await b.sk.post('/v1/send', { to: 'tamper@example.org', template: id, subscribed: true });
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const path = linkFrom(String(messageTo('tamper@example.org')!.parsed.html), 'unsubscribe');
    // Change a character inside the signature (the final base64url character can carry unused bits).
    const i = path.length - 10;
    const tampered = path.slice(0, i) + (path[i] === 'A' ? 'B' : 'A') + path.slice(i + 1);
    const bad = await server.api.request('POST', tampered, { raw: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(bad.status, 404);
    const wrongAction = await server.api.request('POST', path.replace('/unsubscribe/', '/subscribe/'), {
      raw: '',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(wrongAction.status, 404);
    assert.equal((await b.sk.get(`/contacts/${res.body.data.emails[0].contact.id}`)).body.subscribed, true);
  });
});

describe('the delivery engine', () => {
  test('the per-project throttle spaces messages across every worker', async () => {
    const slow = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '4' });
    try {
      const p = await bootstrap(slow.api);
      await verifyDomain(p.sk, dns, 'slow.example.test');
      const to = Array.from({ length: 8 }, (_, i) => `slow${i}@example.org`);
      const requested = Date.now();
      const res = await p.sk.post('/v1/send', { to, from: 'a@slow.example.test', subject: 's', body: 'b' });
      assert.equal(res.status, 200);
      const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);
      const sent = await Promise.all(ids.map((id) => waitForStatus(p.sk, id, ['SENT'], 20_000)));
      const times = sent.map((e) => Date.parse(e.sentAt)).sort((x, y) => x - y);
      // 8 messages at 4/s take slots 250 ms apart, so the last cannot leave before 1.75 s after the
      // request; unthrottled they would all leave within a few ms. (A lower bound: a slow machine
      // only makes the messages later. The spread between the first and the last is not asserted:
      // the first also waits for the SMTP connection.)
      assert.ok(times[7] - requested >= 1700, `the last message left ${times[7] - requested} ms after the request`);
      assert.ok(times[3] - requested >= 700, `the fourth message left ${times[3] - requested} ms after the request`);
    } finally {
      await slow.stop();
    }
  });

  test('without SMTP_URL mail is captured: built, signed, stored, DELIVERED and readable raw', async () => {
    const capture = await startTestServer({ DNS_SERVERS: dns.address });
    try {
      const p = await bootstrap(capture.api);
      await verifyDomain(p.sk, dns, 'cap.example.test');
      const res = await p.sk.post('/v1/send', { to: 'cap@example.org', from: 'a@cap.example.test', subject: 'Captured', body: '<p>x</p>' });
      const email = await waitForStatus(p.sk, res.body.data.emails[0].email, ['DELIVERED']);
      assert.ok(email.deliveredAt);
      const raw = await p.sk.get(`/emails/${email.id}/raw`);
      assert.equal(raw.status, 200);
      assert.match(raw.headers.get('content-type') ?? '', /message\/rfc822/);
      assert.match(raw.text, /^DKIM-Signature: /);
      assert.match(raw.text, /Subject: Captured/);
      assert.equal((await dkimResult(Buffer.from(raw.text), dns.address)).result, 'pass');
      const events = await capture.sql<{ name: string }>(`SELECT name FROM events WHERE data->>'emailId' = $1 ORDER BY name`, [email.id]);
      assert.deepEqual(
        events.map((e) => e.name),
        ['email.delivered', 'email.sent'],
      );
    } finally {
      await capture.stop();
    }
  });

  test('a job that runs twice (even concurrently) delivers once; an expired lease is taken over', async () => {
    const api = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, PROCESS_ROLE: 'api' });
    try {
      const p = await bootstrap(api.api);
      await verifyDomain(p.sk, dns, 'once.example.test');
      const res = await p.sk.post('/v1/send', { to: 'once@example.org', from: 'a@once.example.test', subject: 'once', body: 'b' });
      const emailId = res.body.data.emails[0].email;
      await Promise.all([deliverEmail(api.ctx, emailId), deliverEmail(api.ctx, emailId), deliverEmail(api.ctx, emailId)]);
      await deliverEmail(api.ctx, emailId);
      const email = (await p.sk.get(`/emails/${emailId}`)).body;
      assert.equal(email.status, 'SENT');
      assert.equal(email.attempts, 1);
      assert.equal(sink.messages.filter((m) => m.envelope.to.includes('once@example.org')).length, 1);

      // A worker died mid-send: the row is SENDING with an expired lease. The next run resumes it.
      const crashed = await p.sk.post('/v1/send', { to: 'crashed@example.org', from: 'a@once.example.test', subject: 'c', body: 'b' });
      const crashedId = crashed.body.data.emails[0].email;
      await api.sql(`UPDATE emails SET status = 'SENDING', attempts = 1, locked_until = now() - interval '1 second' WHERE id = $1`, [crashedId]);
      await deliverEmail(api.ctx, crashedId);
      assert.equal((await p.sk.get(`/emails/${crashedId}`)).body.status, 'SENT');
      // …but a live lease is respected.
      const live = await p.sk.post('/v1/send', { to: 'live@example.org', from: 'a@once.example.test', subject: 'l', body: 'b' });
      const liveId = live.body.data.emails[0].email;
      await api.sql(`UPDATE emails SET status = 'SENDING', locked_until = now() + interval '1 minute' WHERE id = $1`, [liveId]);
      await deliverEmail(api.ctx, liveId);
      assert.equal((await p.sk.get(`/emails/${liveId}`)).body.status, 'SENDING');
      assert.equal(sink.messages.filter((m) => m.envelope.to.includes('live@example.org')).length, 0);
    } finally {
      await api.stop();
    }
  });

  test("a send's emails share one delivery job; a job in the one-email shape queued before that is still delivered", async () => {
    const to = ['j1@example.org', 'j2@example.org', 'j3@example.org'];
    const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'jobs', body: 'b' });
    assert.equal(res.status, 200, res.text);
    const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);
    await Promise.all(ids.map((id) => waitForStatus(b.sk, id, ['SENT'])));
    const jobs = await server.sql<{ data: { emailIds: string[] } }>(
      `SELECT data FROM pgboss.job WHERE name = 'email-delivery' AND data->'emailIds' ?| $1::text[]`,
      [ids],
    );
    assert.deepEqual(
      jobs.map((j) => [...j.data.emailIds].sort()),
      [[...ids].sort()],
    );

    // Queued by a Herald before jobs named several emails: { emailId }.
    const [{ id }] = await server.sql<{ id: string }>(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, '<p>b</p>') RETURNING id)
       INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status)
       VALUES (gen_random_uuid(), $1, 'older@example.org', $2, 'TRANSACTIONAL', 'older job', (SELECT id FROM c), 'QUEUED') RETURNING id`,
      [b.project.id, FROM],
    );
    await server.ctx.jobs.send('email-delivery', { emailId: id });
    assert.equal((await waitForStatus(b.sk, id, ['SENT', 'FAILED'])).status, 'SENT');
    assert.equal(sink.messages.filter((m) => m.envelope.to.includes('older@example.org')).length, 1);
  });

  test('a delivery job of a shape Herald does not write fails alone and holds no other delivery back', async () => {
    const bad = await server.ctx.jobs.send('email-delivery', { emailIds: 'not a list' });
    const res = await b.sk.post('/v1/send', { to: 'after-bad@example.org', from: FROM, subject: 'after', body: 'b' });
    assert.equal(res.status, 200, res.text);
    assert.equal((await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT', 'FAILED'])).status, 'SENT');
    await waitFor('the bad job failed', async () => {
      const [job] = await server.sql<{ state: string }>(`SELECT state::text FROM pgboss.job WHERE id = $1`, [bad]);
      return job.state === 'retry' || job.state === 'failed';
    });
    const [job] = await server.sql<{ output: unknown }>(`SELECT output FROM pgboss.job WHERE id = $1`, [bad]);
    assert.deepEqual(job.output, { message: 'The payload is not valid' });
  });

  test('a slow relay does not lose a live claim: the worker renews its lease while it waits', async () => {
    const to = 'slow@example.org';
    sink.slowFor(to, 13_000); // longer than a renewal period (10 s)
    const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'slow', body: 'b' });
    assert.equal(res.status, 200, res.text);
    const emailId = res.body.data.emails[0].email;
    const leaseOf = async () =>
      (
        await server.sql<{ status: string; lease: number | null }>(
          'SELECT status, extract(epoch FROM locked_until)::float8 AS lease FROM emails WHERE id = $1',
          [emailId],
        )
      )[0];
    const first = await waitFor('the claim', async () => {
      const row = await leaseOf();
      return row.status === 'SENDING' ? row : null;
    });
    const renewed = await waitFor(
      'the lease to be renewed',
      async () => {
        const row = await leaseOf();
        return row.status === 'SENDING' && row.lease! > first.lease! + 5 ? row : null;
      },
      20_000,
      250,
    );
    assert.ok(renewed.lease! > first.lease!, 'the lease moved forward while the relay was still answering');
    await waitFor('the message', async () => messageTo(to), 30_000, 100);
    // The sink has the message once DATA ends, a moment before the worker reads the relay's 250 and records it.
    const email = await waitForStatus(b.sk, emailId, ['SENT', 'FAILED', 'QUEUED']);
    assert.equal(email.status, 'SENT');
    assert.equal(email.attempts, 1);
    assert.equal(sink.messages.filter((m) => m.envelope.to.includes(to)).length, 1);
  });

  test('a message handed to the relay by a worker that died is recorded as sent, never sent again', async () => {
    const api = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, PROCESS_ROLE: 'api' });
    try {
      const p = await bootstrap(api.api);
      await verifyDomain(p.sk, dns, 'handoff.example.test');
      const res = await p.sk.post('/v1/send', { to: 'handed@example.org', from: 'a@handoff.example.test', subject: 'h', body: 'b' });
      const emailId = res.body.data.emails[0].email;
      // The state a worker leaves when it dies between the hand-off (before the final dot) and the relay's 250.
      await api.sql(
        `UPDATE emails SET status = 'SENDING', attempts = 1, subject = 'h', message_id = '<handed@handoff.example.test>',
                handed_off_at = now() - interval '3 minutes', locked_until = now() - interval '1 second' WHERE id = $1`,
        [emailId],
      );
      await deliverEmail(api.ctx, emailId);
      await deliverEmail(api.ctx, emailId);
      const email = (await p.sk.get(`/emails/${emailId}`)).body;
      assert.equal(email.status, 'SENT');
      assert.equal(email.attempts, 1);
      assert.equal(sink.messages.filter((m) => m.envelope.to.includes('handed@example.org')).length, 0);
      const events = await api.sql<{ name: string }>(`SELECT name FROM events WHERE data->>'emailId' = $1`, [emailId]);
      assert.deepEqual(
        events.map((e) => e.name),
        ['email.sent'],
      );
    } finally {
      await api.stop();
    }
  });

  test('GET /emails lists newest first with a cursor, filtered by contact; other projects see 404', async () => {
    const res = await b.sk.post('/v1/send', { to: ['list1@example.org', 'list1@example.org', 'list1@example.org'], from: FROM, subject: 's', body: 'b' });
    const contactId = res.body.data.emails[0].contact.id;
    const page1 = await b.sk.get(`/emails?contactId=${contactId}&limit=2`);
    assert.equal(page1.status, 200);
    assert.equal(page1.body.total, 3);
    assert.equal(page1.body.data.length, 2);
    assert.equal(page1.body.hasMore, true);
    const page2 = await b.sk.get(`/emails?contactId=${contactId}&limit=2&cursor=${page1.body.cursor}`);
    assert.equal(page2.body.data.length, 1);
    assert.equal(page2.body.hasMore, false);
    assert.equal(page2.body.cursor, undefined);
    const seen = [...page1.body.data, ...page2.body.data].map((e: { id: string }) => e.id);
    assert.deepEqual([...seen].sort(), res.body.data.emails.map((e: { email: string }) => e.email).sort());
    const other = await bootstrap(server.api);
    assert.equal((await other.sk.get(`/emails/${seen[0]}`)).status, 404);
    assert.equal((await b.sk.get('/emails?cursor=garbage')).status, 400);
  });
});

describe('header lines stay within RFC 5322', () => {
  test('a 998-character custom header value without spaces is sent on lines of at most 998 characters, arrives whole and is DKIM-signed', async () => {
    const long = 'v'.repeat(998);
    const spaced = `${'w'.repeat(500)} ${'x'.repeat(497)}`;
    for (const [to, attachments] of [
      ['long1@example.org', undefined],
      ['long2@example.org', [{ filename: 'a.txt', content: 'aGk=' }]],
    ] as const) {
      const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 's', body: 'b', headers: { 'X-Long-Value': long, 'X-Spaced': spaced }, attachments });
      assert.equal(res.status, 200, res.text);
      await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
      const msg = messageTo(to)!;
      const lines = msg.raw.toString('latin1').split('\r\n');
      const longest = Math.max(...lines.map((l) => l.length));
      assert.ok(longest <= 998, `longest line ${longest}`);
      // Sent as RFC 2047 encoded words (they fold between them), which a reader decodes to the value.
      const words = String(msg.parsed.headers.get('x-long-value')).trim().split(/\s+/);
      const decoded = Buffer.concat(words.map((w) => Buffer.from(/^=\?UTF-8\?B\?([^?]*)\?=$/.exec(w)![1], 'base64'))).toString('utf8');
      assert.equal(decoded, long);
      assert.equal(msg.parsed.headers.get('x-spaced'), spaced);
      const dkim = await dkimResult(msg.raw, dns.address);
      assert.equal(dkim.result, 'pass', `DKIM ${dkim.result}: ${dkim.why}`);
    }
  });
});
