import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { certificateSource } from '../src/modules/webhooks/sns.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';

const FROM = 'news@mail.example.test';
const CERT_URL = 'https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem';
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:ses-events';

let dir: string;
let signingKey: string;
let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;

before(async () => {
  // A self-signed certificate standing in for Amazon's: the server trusts it through SNS_TRUSTED_CERT_FILE.
  dir = mkdtempSync(path.join(tmpdir(), 'herald-sns-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=sns.amazonaws.com',
      '-days',
      '1',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  signingKey = readFileSync(path.join(dir, 'key.pem'), 'utf8');
  ({ dns, sink, server } = await startMailEnv({ SNS_TRUSTED_CERT_FILE: path.join(dir, 'cert.pem'), SNS_TOPIC_ARNS: TOPIC }));
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'mail.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type SnsFields = Record<string, string>;

/** Signs an SNS message as Amazon does: the canonical string of its fields, SHA1withRSA (v1) or SHA256withRSA (v2). */
function signed(fields: SnsFields, version: '1' | '2' = '2', key = signingKey): SnsFields {
  const keys =
    fields.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  const canonical = keys
    .filter((k) => fields[k] !== undefined)
    .map((k) => `${k}\n${fields[k]}\n`)
    .join('');
  const signature = sign(version === '1' ? 'sha1' : 'sha256', Buffer.from(canonical), key).toString('base64');
  return {
    SigningCertURL: CERT_URL,
    UnsubscribeURL: `https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe`,
    ...fields,
    SignatureVersion: version,
    Signature: signature,
  };
}

function notification(sesEvent: unknown, opts: { messageId?: string; version?: '1' | '2'; timestamp?: string } = {}): SnsFields {
  return signed(
    {
      Type: 'Notification',
      MessageId: opts.messageId ?? randomUUID(),
      TopicArn: TOPIC,
      Message: JSON.stringify(sesEvent),
      Timestamp: opts.timestamp ?? new Date().toISOString(),
    },
    opts.version,
  );
}

/** POSTs as SNS does: JSON with Content-Type text/plain. */
const deliver = (message: SnsFields, contentType = 'text/plain; charset=UTF-8') =>
  server.api.post('/webhooks/notifications', undefined, {
    raw: JSON.stringify(message),
    headers: { 'content-type': contentType, 'x-amz-sns-message-type': message.Type, 'x-amz-sns-message-id': message.MessageId },
  });

function sesEvent(type: string, messageId: string, to: string, detail: Record<string, unknown>) {
  const key = type.toLowerCase();
  const mail = {
    timestamp: new Date().toISOString(),
    source: FROM,
    messageId: `0102018f${randomUUID().replaceAll('-', '')}-000000`,
    destination: [to],
    headersTruncated: false,
    headers: [
      { name: 'From', value: FROM },
      { name: 'To', value: to },
      { name: 'Message-ID', value: messageId },
    ],
    commonHeaders: { from: [FROM], to: [to], messageId },
  };
  // Opens and clicks exist only in configuration-set event publishing (eventType); the rest also as notificationType.
  return type === 'Open' || type === 'Click' ? { eventType: type, mail, [key]: detail } : { notificationType: type, mail, [key]: detail };
}

/** A MARKETING email delivered through the sink to a subscribed contact. */
async function sentEmail(to: string) {
  const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'Hello', body: '<p>Hi</p>', subscribed: true });
  assert.equal(res.status, 200, res.text);
  const [item] = res.body.data.emails;
  const email = await waitForStatus(b.sk, item.email, ['SENT']);
  assert.match(email.messageId, /^<[0-9a-f-]{36}@mail\.example\.test>$/);
  return { id: item.email as string, contactId: item.contact.id as string, messageId: email.messageId as string };
}

const eventsOf = (contactId: string) =>
  server.sql<{ name: string; data: Record<string, unknown> | null }>('SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at, id', [
    contactId,
  ]);

const suppressed = async (email: string) =>
  (await server.sql('SELECT reason FROM suppressions WHERE project_id = $1 AND email = $2', [b.project.id, email]))[0]?.reason ?? null;

describe('SES notifications through SNS', () => {
  test('Delivery: SENT → DELIVERED at the reported time, with email.delivered', async () => {
    const e = await sentEmail('delivered@example.org');
    const at = new Date().toISOString();
    const res = await deliver(
      notification(
        sesEvent('Delivery', e.messageId, 'delivered@example.org', { timestamp: at, recipients: ['delivered@example.org'], smtpResponse: '250 ok' }),
      ),
    );
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { status: 'processed' });
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'DELIVERED');
    assert.equal(email.body.deliveredAt, at);
    const events = await eventsOf(e.contactId);
    assert.deepEqual(
      events.map((x) => x.name),
      ['email.sent', 'email.delivered'],
    );
    assert.deepEqual(events[1].data, { emailId: e.id, subject: 'Hello' });
    const again = await deliver(notification(sesEvent('Delivery', e.messageId, 'delivered@example.org', { timestamp: at })));
    assert.equal(again.status, 200);
    assert.equal((await eventsOf(e.contactId)).length, 2, 'a second Delivery report adds nothing');
  });

  test('a permanent Bounce: BOUNCED, contact unsubscribed with reason, address suppressed; later mail is SUPPRESSED and not delivered', async () => {
    const e = await sentEmail('bounced@example.org');
    const at = new Date(Date.now() - 500).toISOString();
    const res = await deliver(
      notification(
        sesEvent('Bounce', e.messageId, 'bounced@example.org', {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          bouncedRecipients: [{ emailAddress: 'bounced@example.org', action: 'failed', status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 user unknown' }],
          timestamp: at,
          feedbackId: 'feedback-1',
        }),
      ),
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.status, 'processed');
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'BOUNCED');
    assert.equal(email.body.bouncedAt, at);
    assert.equal(email.body.error, 'smtp; 550 5.1.1 user unknown');
    const contact = await b.sk.get(`/contacts/${e.contactId}`);
    assert.equal(contact.body.subscribed, false);
    const events = await eventsOf(e.contactId);
    assert.deepEqual(events.find((x) => x.name === 'email.bounced')?.data, {
      emailId: e.id,
      subject: 'Hello',
      bounceType: 'Permanent',
      bounceSubType: 'General',
      error: 'smtp; 550 5.1.1 user unknown',
    });
    assert.deepEqual(events.find((x) => x.name === 'contact.unsubscribed')?.data, { reason: 'bounce' });
    assert.equal(await suppressed('bounced@example.org'), 'bounce');

    const listed = await b.sk.get('/suppressions');
    const entry = listed.body.data.find((s: { email: string }) => s.email === 'bounced@example.org');
    assert.deepEqual(entry, { email: 'bounced@example.org', reason: 'bounce', emailId: e.id, createdAt: at });

    // Any later email to the address, even transactional and explicitly subscribed, is SUPPRESSED.
    const before = sink.messages.length;
    const again = await b.sk.post('/v1/send', { to: 'Bounced@Example.org', from: FROM, subject: 'Again', body: 'b', subscribed: true });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.data.emails[0].status, 'SUPPRESSED');
    const stored = await b.sk.get(`/emails/${again.body.data.emails[0].email}`);
    assert.equal(stored.body.status, 'SUPPRESSED');
    assert.equal(stored.body.sentAt, null);
    await sentEmail('after-bounce-probe@example.org'); // the worker is running: one more delivery goes through…
    assert.equal(sink.messages.length, before + 1, '…but nothing reached the suppressed address');
    assert.equal(sink.messages.filter((m) => m.envelope.to.includes('bounced@example.org')).length, 1);
  });

  test('a transient Bounce is recorded as an event only: not suppressed, still subscribed', async () => {
    const e = await sentEmail('soft@example.org');
    const res = await deliver(
      notification(
        sesEvent('Bounce', e.messageId, 'soft@example.org', {
          bounceType: 'Transient',
          bounceSubType: 'MailboxFull',
          bouncedRecipients: [{ emailAddress: 'soft@example.org', diagnosticCode: 'smtp; 452 4.2.2 mailbox full' }],
          timestamp: new Date().toISOString(),
        }),
      ),
    );
    assert.equal(res.status, 200, res.text);
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'SENT');
    assert.equal(email.body.bouncedAt, null);
    assert.equal(await suppressed('soft@example.org'), null);
    assert.equal((await b.sk.get(`/contacts/${e.contactId}`)).body.subscribed, true);
    const bounced = (await eventsOf(e.contactId)).find((x) => x.name === 'email.bounced');
    assert.equal(bounced?.data?.bounceType, 'Transient');
    assert.equal(bounced?.data?.bounceSubType, 'MailboxFull');
  });

  test('a Complaint: COMPLAINED, unsubscribed with reason complaint, suppressed', async () => {
    const e = await sentEmail('angry@example.org');
    const at = new Date(Date.now() - 200).toISOString();
    const res = await deliver(
      notification(
        sesEvent('Complaint', e.messageId, 'angry@example.org', {
          complainedRecipients: [{ emailAddress: 'angry@example.org' }],
          timestamp: at,
          feedbackId: 'f-2',
          complaintFeedbackType: 'abuse',
        }),
      ),
    );
    assert.equal(res.status, 200, res.text);
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'COMPLAINED');
    assert.equal(email.body.complainedAt, at);
    assert.equal(await suppressed('angry@example.org'), 'complaint');
    assert.equal((await b.sk.get(`/contacts/${e.contactId}`)).body.subscribed, false);
    const events = await eventsOf(e.contactId);
    assert.deepEqual(events.find((x) => x.name === 'email.complained')?.data, { emailId: e.id, subject: 'Hello', complaintFeedbackType: 'abuse' });
    assert.deepEqual(events.find((x) => x.name === 'contact.unsubscribed')?.data, { reason: 'complaint' });
  });

  test('Open and Click events count on the email like the pixel and redirects do', async () => {
    const e = await sentEmail('engaged@example.org');
    const at = new Date(Date.now() - 100).toISOString();
    const open = await deliver(
      notification(sesEvent('Open', e.messageId, 'engaged@example.org', { timestamp: at, ipAddress: '192.0.2.1', userAgent: 'Mail' })),
    );
    assert.equal(open.status, 200, open.text);
    const click = await deliver(
      notification(
        sesEvent('Click', e.messageId, 'engaged@example.org', {
          timestamp: at,
          link: 'https://shop.example.com/sale',
          ipAddress: '192.0.2.1',
          userAgent: 'Mail',
        }),
      ),
    );
    assert.equal(click.status, 200, click.text);
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.openCount, 1);
    assert.equal(email.body.clickCount, 1);
    assert.equal(email.body.openedAt, at);
    assert.equal(email.body.clickedAt, at);
    const events = await eventsOf(e.contactId);
    assert.equal(events.find((x) => x.name === 'email.clicked')?.data?.link, 'https://shop.example.com/sale');
  });

  test('SignatureVersion 1 (SHA1withRSA) and application/json bodies are accepted too', async () => {
    const e = await sentEmail('v1@example.org');
    const res = await deliver(
      notification(sesEvent('Open', e.messageId, 'v1@example.org', { timestamp: new Date().toISOString() }), { version: '1' }),
      'application/json',
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.status, 'processed');
    assert.equal((await b.sk.get(`/emails/${e.id}`)).body.openCount, 1);
  });

  test('a notification about an unknown message, or of another event type, is acknowledged and ignored', async () => {
    const unknown = await deliver(notification(sesEvent('Open', '<00000000-0000-7000-8000-000000000000@mail.example.test>', 'x@example.org', {})));
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.body, { status: 'ignored' });
    const e = await sentEmail('send-event@example.org');
    const other = await deliver(notification(sesEvent('Send', e.messageId, 'send-event@example.org', {})));
    assert.deepEqual(other.body, { status: 'ignored' });
    const notJson = await deliver(
      signed({ Type: 'Notification', MessageId: randomUUID(), TopicArn: TOPIC, Message: 'hello', Timestamp: new Date().toISOString() }),
    );
    assert.deepEqual(notJson.body, { status: 'ignored' });
  });
});

describe('idempotency on the SNS MessageId', () => {
  test('the same notification delivered twice is counted once', async () => {
    const e = await sentEmail('twice@example.org');
    const message = notification(sesEvent('Open', e.messageId, 'twice@example.org', { timestamp: new Date().toISOString() }));
    const first = await deliver(message);
    const second = await deliver(message);
    assert.deepEqual(first.body, { status: 'processed' });
    assert.equal(second.status, 200, 'SNS must see success, or it retries');
    assert.deepEqual(second.body, { status: 'duplicate' });
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.openCount, 1);
    assert.equal((await eventsOf(e.contactId)).filter((x) => x.name === 'email.opened').length, 1);
  });

  test('concurrent redeliveries of one notification: exactly one is processed', async () => {
    const e = await sentEmail('race@example.org');
    const message = notification(sesEvent('Click', e.messageId, 'race@example.org', { timestamp: new Date().toISOString(), link: 'https://x.example.com/' }));
    const results = await Promise.all(Array.from({ length: 5 }, () => deliver(message)));
    assert.deepEqual(results.map((r) => r.body.status).sort(), ['duplicate', 'duplicate', 'duplicate', 'duplicate', 'processed']);
    assert.equal((await b.sk.get(`/emails/${e.id}`)).body.clickCount, 1);
  });

  test('a second, different notification of the same hard bounce changes nothing more', async () => {
    const e = await sentEmail('rebounce@example.org');
    const detail = {
      bounceType: 'Permanent',
      bounceSubType: 'General',
      bouncedRecipients: [{ emailAddress: 'rebounce@example.org' }],
      timestamp: new Date().toISOString(),
    };
    await deliver(notification(sesEvent('Bounce', e.messageId, 'rebounce@example.org', detail)));
    await deliver(notification(sesEvent('Bounce', e.messageId, 'rebounce@example.org', detail)));
    const events = await eventsOf(e.contactId);
    assert.equal(events.filter((x) => x.name === 'email.bounced').length, 1);
    assert.equal(events.filter((x) => x.name === 'contact.unsubscribed').length, 1);
  });
});

describe('rejected SNS messages (403, nothing changed)', () => {
  async function assertUnchanged(e: { id: string; contactId: string }, address: string) {
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'SENT');
    assert.equal(email.body.complainedAt, null);
    assert.equal(await suppressed(address), null);
    assert.equal((await b.sk.get(`/contacts/${e.contactId}`)).body.subscribed, true);
  }

  test('a bad signature, a tampered message or a foreign key is 403; the genuine message still works after', async () => {
    const e = await sentEmail('victim@example.org');
    const genuine = notification(sesEvent('Complaint', e.messageId, 'victim@example.org', { complainedRecipients: [{ emailAddress: 'victim@example.org' }] }));

    const badSignature = { ...genuine, Signature: Buffer.from('not the signature').toString('base64') };
    const flipped = Buffer.from(genuine.Signature, 'base64');
    flipped[10] ^= 0xff;
    const oneBitOff = { ...genuine, Signature: flipped.toString('base64') };
    const tampered = { ...genuine, Message: genuine.Message.replace('victim@example.org', 'other@example.org') };
    const otherKey = execFileSync('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const foreign = signed({ ...genuine }, '2', otherKey);
    const wrongVersion = { ...genuine, SignatureVersion: '1' };
    for (const [name, message] of Object.entries({ badSignature, oneBitOff, tampered, foreign, wrongVersion })) {
      const res = await deliver(message);
      assert.equal(res.status, 403, `${name}: ${res.text}`);
      assert.equal(res.body.error.code, 'FORBIDDEN');
    }
    await assertUnchanged(e, 'victim@example.org');

    // The rejected attempts did not burn the MessageId.
    const ok = await deliver(genuine);
    assert.deepEqual(ok.body, { status: 'processed' });
    assert.equal(await suppressed('victim@example.org'), 'complaint');
  });

  test('a SigningCertURL outside the Amazon SNS hosts is 403', async () => {
    const e = await sentEmail('certs@example.org');
    const event = sesEvent('Complaint', e.messageId, 'certs@example.org', { complainedRecipients: [{ emailAddress: 'certs@example.org' }] });
    for (const url of [
      'https://evil.example.com/SimpleNotificationService-1.pem',
      'https://sns.eu-west-1.amazonaws.com.evil.example.com/cert.pem',
      'http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.pem',
      'https://sns.eu-west-1.amazonaws.com/not-a-certificate.txt',
      'https://evil@sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.pem',
      'https://sns.eu-west-1.amazonaws.com:8443/SimpleNotificationService-1.pem',
      'https://s3.amazonaws.com/SimpleNotificationService-1.pem',
    ]) {
      const message = { ...notification(event), SigningCertURL: url };
      const res = await deliver(message);
      assert.equal(res.status, 403, `${url}: ${res.text}`);
    }
    await assertUnchanged(e, 'certs@example.org');
  });

  test('a correctly signed message over an hour old, over 5 minutes ahead or with no date-time is 400 and changes nothing', async () => {
    const e = await sentEmail('replayed@example.org');
    const messageId = randomUUID();
    const bounce = sesEvent('Bounce', e.messageId, 'replayed@example.org', {
      bounceType: 'Permanent',
      bounceSubType: 'General',
      bouncedRecipients: [{ emailAddress: 'replayed@example.org' }],
    });
    const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();
    for (const timestamp of ['2001-01-01T00:00:00Z', ago(61), ago(-6), 'yesterday', '2001', '2026-13-45T99:00:00Z']) {
      const res = await deliver(notification(bounce, { messageId, timestamp }));
      assert.equal(res.status, 400, `${timestamp}: ${res.text}`);
      assert.equal(res.body.error.code, 'BAD_REQUEST');
      assert.equal(res.body.error.details.timestamp, timestamp);
    }
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'SENT');
    assert.equal(await suppressed('replayed@example.org'), null);
    assert.equal((await b.sk.get(`/contacts/${e.contactId}`)).body.subscribed, true);

    // Within the window (a retry 59 minutes on, a clock 4 minutes ahead), and the MessageId not burnt.
    const ok = await deliver(notification(bounce, { messageId, timestamp: ago(59) }));
    assert.deepEqual(ok.body, { status: 'processed' });
    assert.equal(await suppressed('replayed@example.org'), 'bounce');
    const ahead = await deliver(notification(bounce, { timestamp: ago(-4) }));
    assert.equal(ahead.status, 200, ahead.text);
  });

  test('malformed bodies are 400 (not JSON) or 422 (not an SNS message)', async () => {
    const notJson = await server.api.post('/webhooks/notifications', undefined, { raw: '{nope', headers: { 'content-type': 'text/plain' } });
    assert.equal(notJson.status, 400);
    assert.equal(notJson.body.error.code, 'INVALID_JSON');
    const notSns = await deliver({ hello: 'world' } as unknown as SnsFields);
    assert.equal(notSns.status, 422);
    assert.equal(notSns.body.error.code, 'VALIDATION_ERROR');
  });

  test('a text/plain body of more than 100,000 JSON values is 413 before it is parsed, as JSON bodies are', async () => {
    const raw = `{"Type":"Notification","x":[${'0,'.repeat(150_000)}0]}`;
    const res = await server.api.post('/webhooks/notifications', undefined, { raw, headers: { 'content-type': 'text/plain' } });
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(res.body.error.details, { maxValues: 100_000 });
  });
});

describe('the topic allow-list (SNS_TOPIC_ARNS) and feedback matching', () => {
  const ATTACKER_TOPIC = 'arn:aws:sns:eu-west-1:999999999999:attacker-topic';

  async function assertUntouched(e: { id: string; contactId: string }, address: string) {
    const email = await b.sk.get(`/emails/${e.id}`);
    assert.equal(email.body.status, 'SENT');
    assert.equal(email.body.complainedAt, null);
    assert.equal(await suppressed(address), null);
    assert.equal((await b.sk.get(`/contacts/${e.contactId}`)).body.subscribed, true);
  }

  test('a correctly signed complaint from a topic not in SNS_TOPIC_ARNS is 403 and changes nothing', async () => {
    const e = await sentEmail('forged@example.org');
    const event = sesEvent('Complaint', e.messageId, 'forged@example.org', { complainedRecipients: [{ emailAddress: 'forged@example.org' }] });
    const forged = signed({
      Type: 'Notification',
      MessageId: randomUUID(),
      TopicArn: ATTACKER_TOPIC,
      Message: JSON.stringify(event),
      Timestamp: new Date().toISOString(),
    });
    const res = await deliver(forged);
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    assert.match(res.body.error.message, /SNS_TOPIC_ARNS/);
    await assertUntouched(e, 'forged@example.org');
    const genuine = await deliver(notification(event));
    assert.deepEqual(genuine.body, { status: 'processed' }, 'the listed topic still works');
    assert.equal(await suppressed('forged@example.org'), 'complaint');
  });

  test('with SNS_TOPIC_ARNS unset, even a genuine message from the real topic is 403', async () => {
    const e = await sentEmail('unset@example.org');
    const closed = await startTestServer({ SNS_TRUSTED_CERT_FILE: path.join(dir, 'cert.pem'), PROCESS_ROLE: 'api' }, { databaseUrl: server.databaseUrl });
    try {
      const message = notification(sesEvent('Complaint', e.messageId, 'unset@example.org', { complainedRecipients: [{ emailAddress: 'unset@example.org' }] }));
      const res = await closed.api.post('/webhooks/notifications', undefined, { raw: JSON.stringify(message), headers: { 'content-type': 'text/plain' } });
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.match(res.body.error.message, /set SNS_TOPIC_ARNS/);
    } finally {
      await closed.stop();
    }
    await assertUntouched(e, 'unset@example.org');
  });

  test('feedback naming the Message-ID but another recipient or another sender is ignored', async () => {
    const e = await sentEmail('matched@example.org');
    const complaint = (recipient: string) => sesEvent('Complaint', e.messageId, recipient, { complainedRecipients: [{ emailAddress: recipient }] });
    const otherRecipient = await deliver(notification(complaint('someone-else@example.org')));
    assert.equal(otherRecipient.status, 200, otherRecipient.text);
    assert.deepEqual(otherRecipient.body, { status: 'ignored' });
    const otherSender = complaint('matched@example.org');
    otherSender.mail.source = 'news@attacker.example';
    assert.deepEqual((await deliver(notification(otherSender))).body, { status: 'ignored' });
    const noSender: Record<string, unknown> = complaint('matched@example.org');
    delete (noSender.mail as Record<string, unknown>).source;
    assert.deepEqual((await deliver(notification(noSender))).body, { status: 'ignored' });
    const bounceOfAnother = await deliver(
      notification(sesEvent('Bounce', e.messageId, 'matched@example.org', { bounceType: 'Permanent', bouncedRecipients: [{ emailAddress: 'x@example.org' }] })),
    );
    assert.deepEqual(bounceOfAnother.body, { status: 'ignored' });
    await assertUntouched(e, 'matched@example.org');
    assert.deepEqual((await deliver(notification(complaint('Matched@Example.org')))).body, { status: 'processed' });
    assert.equal((await b.sk.get(`/emails/${e.id}`)).body.status, 'COMPLAINED');
  });
});

describe('SubscriptionConfirmation', () => {
  let probe: Server;
  let probeUrl: string;
  let hits = 0;

  before(async () => {
    probe = createServer((_req, res) => {
      hits++;
      res.end('ok');
    });
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    probeUrl = `http://127.0.0.1:${(probe.address() as { port: number }).port}/confirm`;
  });
  after(() => new Promise<void>((resolve) => probe.close(() => resolve())));

  const confirmation = (subscribeUrl: string) =>
    signed({
      Type: 'SubscriptionConfirmation',
      MessageId: randomUUID(),
      Token: 'token-123',
      TopicArn: TOPIC,
      Message: `You have chosen to subscribe to the topic ${TOPIC}.`,
      SubscribeURL: subscribeUrl,
      Timestamp: new Date().toISOString(),
    });

  test('a SubscribeURL outside the Amazon SNS hosts is refused and never fetched', async () => {
    for (const url of [probeUrl, probeUrl.replace('http:', 'https:'), `https://sns.eu-west-1.amazonaws.com.127.0.0.1.nip.io/confirm`]) {
      const res = await deliver(confirmation(url));
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.error.message, /not an Amazon SNS URL/);
    }
    assert.equal(hits, 0);
  });

  test('a confirmation for a topic not in SNS_TOPIC_ARNS is 403 and never fetched', async () => {
    const message = signed({
      Type: 'SubscriptionConfirmation',
      MessageId: randomUUID(),
      Token: 'token-456',
      TopicArn: 'arn:aws:sns:eu-west-1:999999999999:attacker-topic',
      Message: 'You have chosen to subscribe to the topic arn:aws:sns:eu-west-1:999999999999:attacker-topic.',
      SubscribeURL:
        'https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:eu-west-1:999999999999:attacker-topic&Token=token-456',
      Timestamp: new Date().toISOString(),
    });
    const res = await deliver(message);
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    assert.equal(hits, 0);
  });

  test('a confirmation with a bad signature is 403 and never fetched', async () => {
    const message = { ...confirmation(probeUrl), Token: 'swapped-token' };
    const res = await deliver(message);
    assert.equal(res.status, 403);
    assert.equal(hits, 0);
  });
});

describe('fetching the SNS signing certificate (no SNS_TRUSTED_CERT_FILE)', () => {
  const CN_TOPIC = 'arn:aws-cn:sns:cn-north-1:123456789012:ses-events';
  const CN_CERT_URL = 'https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-0000000000000000000000.pem';
  const certUrl = (hex: string, region = 'eu-west-1') => `https://sns.${region}.amazonaws.com/SimpleNotificationService-${hex}.pem`;
  const realFetch = globalThis.fetch;
  let live: TestServer;
  let certPem: string;
  /** What the stand-in for Amazon answers; every URL Herald fetches outside 127.0.0.1 is recorded in `fetched`. */
  let aws: (url: string) => Response | Promise<Response>;
  const fetched: string[] = [];
  const inits: (RequestInit | undefined)[] = [];
  const certificate = () => new Response(certPem);
  const notFound = () => new Response('<Error><Code>NotFound</Code></Error>', { status: 404 });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  before(async () => {
    certPem = readFileSync(path.join(dir, 'cert.pem'), 'utf8');
    // The server runs in this process: its outbound fetches come through here.
    globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.startsWith('http://127.0.0.1')) return realFetch(input, init);
      fetched.push(url);
      inits.push(init);
      return aws(url);
    }) as typeof fetch;
    live = await startTestServer({ SNS_TOPIC_ARNS: `${TOPIC},${CN_TOPIC}`, PROCESS_ROLE: 'api' }, { databaseUrl: server.databaseUrl });
  });
  after(async () => {
    globalThis.fetch = realFetch;
    await live?.stop();
  });

  /** A correctly signed notification (its Message is not an SES event: verified, then `ignored`). */
  const signedVia = (signingCertUrl: string, topic = TOPIC) =>
    signed({
      Type: 'Notification',
      MessageId: randomUUID(),
      TopicArn: topic,
      Message: 'hello',
      Timestamp: new Date().toISOString(),
      SigningCertURL: signingCertUrl,
    });
  const post = (message: SnsFields) =>
    live.api.post('/webhooks/notifications', undefined, { raw: JSON.stringify(message), headers: { 'content-type': 'text/plain' } });
  const reset = () => {
    fetched.length = 0;
    inits.length = 0;
  };

  test('the real flow: the certificate at SigningCertURL verifies the message; fetched once, with a time limit and no redirects', async () => {
    aws = (url) => (url === CERT_URL || url === CN_CERT_URL ? certificate() : notFound());
    reset();
    for (let i = 0; i < 3; i++) {
      const res = await post(signedVia(CERT_URL));
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { status: 'ignored' });
    }
    const cn = await post(signedVia(CN_CERT_URL, CN_TOPIC));
    assert.deepEqual(cn.body, { status: 'ignored' }, cn.text);
    assert.deepEqual(fetched, [CERT_URL, CN_CERT_URL]);
    assert.equal(inits[0]?.redirect, 'error');
    assert.ok(inits[0]?.signal instanceof AbortSignal);

    const forged = { ...signedVia(CERT_URL), Message: 'tampered' };
    const bad = await post(forged);
    assert.equal(bad.status, 403);
    assert.equal(bad.body.error.message, 'Invalid SNS message signature');
  });

  test("a SigningCertURL other than https://sns.<topic's region>.amazonaws.com/SimpleNotificationService-<id>.pem is 403 and never fetched", async () => {
    aws = certificate; // even where Amazon would serve a certificate
    reset();
    const hex = '0123456789abcdef0123456789abcdef';
    const cases: [string, string][] = [
      [certUrl(hex, 'us-east-1'), TOPIC],
      [certUrl(hex, 'attacker'), TOPIC],
      [certUrl(hex).replace('.com/', '.com.cn/'), TOPIC],
      [`${certUrl(hex)}?x=1`, TOPIC],
      [`${certUrl(hex)}?`, TOPIC],
      [`${certUrl(hex)}#frag`, TOPIC],
      [certUrl(hex).replace('.com/', '.com./'), TOPIC],
      [certUrl(hex).replace('sns.eu-west-1.amazonaws.com', 'SNS.EU-WEST-1.AMAZONAWS.COM'), TOPIC],
      [certUrl(hex).replace('.com/', '.com:443/'), TOPIC],
      [certUrl(hex).replace('https://', 'https://sns@'), TOPIC],
      [certUrl(hex).replace('.com/', '.com%2eevil.com/'), TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/a.pem', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/..%2f..%2fSimpleNotificationService-01.pem', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/x/SimpleNotificationService-01.pem', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-01-02.pem', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-.pem', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-01.pem/', TOPIC],
      ['https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-01.PEM', TOPIC],
      [CERT_URL, CN_TOPIC], // a .com host for an aws-cn topic
      [CN_CERT_URL.replace('.com.cn/', '.com/'), CN_TOPIC],
      [CN_CERT_URL, TOPIC],
    ];
    for (const [url, topic] of cases) {
      const res = await post(signedVia(url, topic));
      assert.equal(res.status, 403, `${url}: ${res.text}`);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.equal(res.body.error.message, "SigningCertURL is not an Amazon SNS certificate URL of the topic's region", url);
    }
    assert.deepEqual(fetched, []);
  });

  test('a failing certificate URL is fetched once, then answered 403 from memory', async () => {
    const missing = certUrl('dead0000000000000000000000000001');
    const notACertificate = certUrl('dead0000000000000000000000000002');
    aws = (url) => (url === notACertificate ? new Response('hello') : notFound());
    reset();
    for (let i = 0; i < 20; i++) {
      const res = await post(signedVia(missing));
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.equal(res.body.error.message, 'The SNS signing certificate could not be fetched (HTTP 404)');
    }
    for (let i = 0; i < 5; i++) {
      const res = await post(signedVia(notACertificate));
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.message, 'The SNS signing certificate is not a valid X.509 certificate');
    }
    assert.deepEqual(fetched, [missing, notACertificate]);
  });

  test('concurrent requests for one uncached certificate share one fetch', async () => {
    const slow = certUrl('51000000000000000000000000000001');
    const slowMissing = certUrl('51000000000000000000000000000002');
    aws = async (url) => {
      await sleep(300);
      return url === slow ? certificate() : notFound();
    };
    reset();
    const ok = await Promise.all(Array.from({ length: 20 }, () => post(signedVia(slow))));
    assert.deepEqual(
      ok.map((r) => r.body.status),
      Array(20).fill('ignored'),
    );
    const failed = await Promise.all(Array.from({ length: 20 }, () => post(signedVia(slowMissing))));
    assert.deepEqual(
      failed.map((r) => r.status),
      Array(20).fill(403),
    );
    assert.deepEqual(fetched, [slow, slowMissing]);
  });

  test('a certificate in use stays cached while 60 others, and 60 failing URLs, come and go', async () => {
    aws = certificate;
    reset();
    for (let i = 0; i < 60; i++) {
      if (i % 10 === 0) assert.deepEqual((await post(signedVia(CERT_URL))).body, { status: 'ignored' });
      assert.deepEqual((await post(signedVia(certUrl(`c0${i.toString(16).padStart(30, '0')}`)))).body, { status: 'ignored' });
    }
    aws = notFound;
    for (let i = 0; i < 60; i++) assert.equal((await post(signedVia(certUrl(`f0${i.toString(16).padStart(30, '0')}`)))).status, 403);
    assert.deepEqual((await post(signedVia(CERT_URL))).body, { status: 'ignored' });
    assert.equal(fetched.length, 120);
    assert.ok(!fetched.includes(CERT_URL), 'the certificate in use was never fetched again');
  });

  test('a certificate body is not read past 16 KB', async () => {
    let pulled = 0;
    /** 1 MB of `A`, 1 KB a chunk, counting what the reader asks for. */
    const megabyte = () =>
      new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled >= 1024 * 1024) return controller.close();
          pulled += 1024;
          controller.enqueue(new Uint8Array(1024).fill(65));
        },
      });
    const streamed = certUrl('b1600000000000000000000000000001');
    const declared = certUrl('b1600000000000000000000000000002');
    aws = (url) => new Response(megabyte(), url === declared ? { headers: { 'content-length': String(1024 * 1024) } } : {});
    reset();
    const res = await post(signedVia(streamed));
    assert.ok(pulled <= 20 * 1024, `read ${pulled} bytes`);
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    assert.equal(res.body.error.message, 'The SNS signing certificate could not be fetched (larger than 16 KB)');

    pulled = 0;
    const announced = await post(signedVia(declared));
    assert.equal(announced.body.error.message, 'The SNS signing certificate could not be fetched (larger than 16 KB)');
    assert.ok(pulled <= 2 * 1024, `read ${pulled} bytes of a body announced as 1 MB`);
    assert.deepEqual(fetched, [streamed, declared]);
  });

  test('a failure is remembered for 15 s, no longer; both caches are bounded', async () => {
    let now = 1_000_000;
    const source = certificateSource({ snsTrustedCertFile: undefined }, { now: () => now });
    const forbidden = { statusCode: 403, code: 'FORBIDDEN' };
    aws = notFound;
    reset();
    const missing = certUrl('a000000000000000000000000000000f');
    await assert.rejects(source.publicKeyFor(missing), forbidden);
    now += 14_999;
    await assert.rejects(source.publicKeyFor(missing), forbidden);
    assert.equal(fetched.length, 1);
    now += 2;
    await assert.rejects(source.publicKeyFor(missing), forbidden);
    assert.equal(fetched.length, 2, 'fetched again after 15 s');

    // 1000 failures are remembered: the 1001st pushes out the oldest.
    reset();
    for (let i = 0; i <= 1000; i++) await assert.rejects(source.publicKeyFor(certUrl(`7${i.toString(16).padStart(31, '0')}`)), forbidden);
    await assert.rejects(source.publicKeyFor(certUrl(`7${(1000).toString(16).padStart(31, '0')}`)), forbidden);
    assert.equal(fetched.length, 1001);
    await assert.rejects(source.publicKeyFor(certUrl(`7${'0'.repeat(31)}`)), forbidden);
    assert.equal(fetched.length, 1002);

    // 50 certificates are kept: the 51st pushes out the least recently used.
    aws = certificate;
    reset();
    for (let i = 0; i <= 50; i++) await source.publicKeyFor(certUrl(`8${i.toString(16).padStart(31, '0')}`));
    await source.publicKeyFor(certUrl(`8${(50).toString(16).padStart(31, '0')}`));
    assert.equal(fetched.length, 51);
    await source.publicKeyFor(certUrl(`8${'0'.repeat(31)}`));
    assert.equal(fetched.length, 52);
  });
});
