import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type SmtpSink, dkimResult } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';
import { whileAnotherTransaction } from './helpers/other-transaction.ts';

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;
const FROM = 'hello@mail.example.test';

before(async () => {
  ({ dns, sink, server } = await startMailEnv({ DELIVERY_RETRY_BASE_SECONDS: '1' }));
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'mail.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

const messageTo = (address: string) => sink.messages.find((m) => m.envelope.to.includes(address));

describe('POST /v1/send delivers through SMTP', () => {
  test('renders, signs and delivers one message; the new contact is unsubscribed by default', async () => {
    const res = await b.sk.post('/v1/send', {
      to: 'Ada@Example.org',
      from: FROM,
      subject: 'Hi {{firstName}}',
      body: '<p>Hello <b>{{firstName}}</b>, plan {{plan ?? "free"}}</p>',
      data: { firstName: 'Ada', coupon: { value: 'X1', persistent: false } },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.success, true);
    const [item] = res.body.data.emails;
    assert.equal(item.contact.email, 'ada@example.org');
    assert.match(item.contact.id, /^cnt_/);
    assert.match(item.email, /^[0-9a-f-]{36}$/);
    assert.equal(item.status, 'QUEUED');
    assert.ok(!Number.isNaN(Date.parse(res.body.data.timestamp)));

    const email = await waitForStatus(b.sk, item.email, ['SENT']);
    assert.equal(email.subject, 'Hi Ada');
    assert.equal(email.attempts, 1);
    const msg = messageTo('ada@example.org');
    assert.ok(msg, 'the message reached the SMTP sink');
    assert.equal(msg.parsed.subject, 'Hi Ada');
    assert.match(String(msg.parsed.html), /Hello <b>Ada<\/b>, plan free/);
    assert.match(String(msg.parsed.text), /Hello ADA|Hello Ada/);
    assert.equal(msg.parsed.messageId, `<${item.email}@mail.example.test>`);
    assert.equal(msg.parsed.headers.get('list-unsubscribe'), undefined, 'transactional mail has no List-Unsubscribe');
    const dkim = await dkimResult(msg.raw, dns.address);
    assert.deepEqual({ result: dkim.result, domain: dkim.domain }, { result: 'pass', domain: 'mail.example.test' }, dkim.why);

    const contact = await b.sk.get(`/contacts/${item.contact.id}`);
    assert.equal(contact.body.subscribed, false);
    assert.equal(contact.body.data.firstName, 'Ada');
    assert.equal(contact.body.data.coupon, undefined, 'one-off values are not stored');
  });

  test('an array of recipients gets one contact and one rendered email each, with display names', async () => {
    const res = await b.sk.post('/v1/send', {
      to: [{ name: 'Bob B', email: 'bob@example.org' }, 'carol@example.org'],
      from: { name: 'Herald Team', email: FROM },
      reply: 'support@example.org',
      subject: 'For {{email}}',
      body: '<p>id {{id}}</p>',
      headers: { 'X-Campaign-Tag': 'welcome' },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.emails.length, 2);
    const [bob, carol] = res.body.data.emails;
    assert.notEqual(bob.contact.id, carol.contact.id);
    await waitForStatus(b.sk, bob.email, ['SENT']);
    await waitForStatus(b.sk, carol.email, ['SENT']);
    const bobMsg = messageTo('bob@example.org')!;
    assert.equal(bobMsg.parsed.subject, 'For bob@example.org');
    assert.deepEqual(bobMsg.parsed.to && !Array.isArray(bobMsg.parsed.to) ? bobMsg.parsed.to.value[0] : null, { address: 'bob@example.org', name: 'Bob B' });
    assert.equal(bobMsg.parsed.from?.value[0].name, 'Herald Team');
    assert.equal(bobMsg.parsed.replyTo?.value[0].address, 'support@example.org');
    assert.equal(bobMsg.parsed.headers.get('x-campaign-tag'), 'welcome');
    assert.match(String(bobMsg.parsed.html), new RegExp(`id ${bob.contact.id}`));
    assert.equal(messageTo('carol@example.org')!.parsed.subject, 'For carol@example.org');
  });

  test('the deprecated name field names the sender when from is a plain address', async () => {
    const res = await b.sk.post('/v1/send', { to: 'dan@example.org', from: FROM, name: 'Old Style', subject: 's', body: 'b' });
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    assert.equal(messageTo('dan@example.org')!.parsed.from?.value[0].name, 'Old Style');
  });

  test('the deprecated name is not applied when from is an object, even one without a name', async () => {
    const res = await b.sk.post('/v1/send', { to: 'dana@example.org', from: { email: FROM }, name: 'Old Style', subject: 's', body: 'b' });
    assert.equal(res.status, 200, res.text);
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const from = messageTo('dana@example.org')!.parsed.from?.value[0];
    assert.equal(from?.address, FROM);
    assert.equal(from?.name, '');
  });

  test('line-wrapped base64 (76 columns, CRLF) is accepted and arrives as the same bytes', async () => {
    const bytes = randomBytes(300);
    const wrapped = bytes.toString('base64').replace(/.{76}/g, '$&\r\n');
    assert.match(wrapped, /\r\n/);
    const res = await b.sk.post('/v1/send', {
      to: 'wrap@example.org',
      from: FROM,
      subject: 'Wrapped',
      body: 'b',
      attachments: [{ filename: 'data.bin', content: wrapped }],
    });
    assert.equal(res.status, 200, res.text);
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    assert.deepEqual(messageTo('wrap@example.org')!.parsed.attachments[0].content, bytes);
  });

  test('attachments arrive intact, inline ones with their Content-ID', async () => {
    const pdf = Buffer.from('%PDF-1.4 test document');
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const res = await b.sk.post('/v1/send', {
      to: 'erin@example.org',
      from: FROM,
      subject: 'Files',
      body: '<img src="cid:logo1">',
      attachments: [
        { filename: 'report.pdf', content: pdf.toString('base64'), contentType: 'application/pdf' },
        { filename: 'logo.png', content: png.toString('base64'), contentType: 'image/png', contentId: 'logo1', disposition: 'inline' },
      ],
    });
    assert.equal(res.status, 200, res.text);
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const atts = messageTo('erin@example.org')!.parsed.attachments;
    const report = atts.find((a) => a.filename === 'report.pdf')!;
    assert.equal(report.contentType, 'application/pdf');
    assert.deepEqual(report.content, pdf);
    const logo = atts.find((a) => a.filename === 'logo.png')!;
    assert.equal(logo.contentId, '<logo1>');
    assert.equal(logo.contentDisposition, 'inline');
  });

  test('an attachment of 9 MB (under the 10 MB limit) is accepted and arrives intact', async () => {
    const big = randomBytes(9 * 2 ** 20);
    const res = await b.sk.post('/v1/send', {
      to: 'big@example.org',
      from: FROM,
      subject: 'Big file',
      body: '<p>Attached</p>',
      attachments: [{ filename: 'big.bin', content: big.toString('base64'), contentType: 'application/octet-stream' }],
    });
    assert.equal(res.status, 200, res.text);
    await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT']);
    const [att] = messageTo('big@example.org')!.parsed.attachments;
    assert.equal(att.content.length, big.length);
    assert.ok(att.content.equals(big), 'the same bytes');
  });
});

describe('recipients and their contacts', () => {
  test('a multi-recipient send locks its known contacts before it creates new ones (the order a group takes, so the two cannot deadlock)', async () => {
    const known = await b.sk.post('/contacts', { email: 'zed@order.test' });
    assert.equal(known.status, 201, known.text);
    let insertedMeanwhile = false;
    // The send waits for zed's row lock; were `amy` (new, first in email order) already inserted
    // by it, a third transaction's insert of amy would wait for the send and time out.
    const res = await whileAnotherTransaction(server, {
      hold: (other) => other.query(`SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE`, [known.body.id]),
      request: () => b.sk.post('/v1/send', { to: ['zed@order.test', 'amy@order.test'], from: FROM, subject: 'Order', body: '<p>Hi</p>' }),
      beforeCommit: async () => {
        const third = await server.ctx.database.pool.connect();
        try {
          await third.query(`SET lock_timeout = '2s'`);
          await third.query(
            `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
             VALUES ('cnt_amy_meanwhile', $1, 'amy@order.test', true, '{}', now(), now())`,
            [b.project.id],
          );
          insertedMeanwhile = true;
        } finally {
          third.release();
        }
      },
    });
    assert.equal(insertedMeanwhile, true);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.data.emails.map((e: { contact: { id: string; email: string } }) => [e.contact.email, e.contact.id]),
      [
        ['zed@order.test', known.body.id],
        ['amy@order.test', 'cnt_amy_meanwhile'],
      ],
    );
    // Both are delivered before the next test arms the sink's failures.
    for (const e of res.body.data.emails) await waitForStatus(b.sk, e.email, ['SENT']);
  });
});

describe('delivery outcomes', () => {
  test('a temporary 4xx is retried and then delivered', async () => {
    sink.failNext({ stage: 'rcpt', code: 451, message: '451 try again later' });
    const res = await b.sk.post('/v1/send', { to: 'retry@example.org', from: FROM, subject: 'retry', body: 'b' });
    const email = await waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT'], 20_000);
    assert.equal(email.attempts, 2);
    assert.equal(sink.messages.filter((m) => m.envelope.to.includes('retry@example.org')).length, 1);
  });

  test('a permanent recipient rejection is a hard bounce: unsubscribed, suppressed, later mail SUPPRESSED', async () => {
    sink.failNext({ stage: 'rcpt', code: 550, message: '550 no such user' });
    const res = await b.sk.post('/v1/send', { to: 'gone@example.org', from: FROM, subject: 'x', body: 'b', subscribed: true });
    const email = await waitForStatus(b.sk, res.body.data.emails[0].email, ['BOUNCED']);
    assert.match(email.error, /550 no such user/);
    const contact = await b.sk.get(`/contacts/${res.body.data.emails[0].contact.id}`);
    assert.equal(contact.body.subscribed, false);
    const again = await b.sk.post('/v1/send', { to: 'gone@example.org', from: FROM, subject: 'x', body: 'b' });
    assert.equal(again.body.data.emails[0].status, 'SUPPRESSED');
    const stored = await waitForStatus(b.sk, again.body.data.emails[0].email, ['SUPPRESSED']);
    assert.equal(stored.sentAt, null);
    const events = await server.sql<{ name: string; data: { reason?: string } }>(`SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at`, [
      res.body.data.emails[0].contact.id,
    ]);
    assert.ok(events.some((e) => e.name === 'email.bounced'));
    assert.ok(events.some((e) => e.name === 'contact.unsubscribed' && e.data?.reason === 'bounce'));
  });

  test('a permanent rejection of the message is FAILED with the server reply', async () => {
    sink.failNext({ stage: 'data', code: 554, message: '554 message refused' });
    const res = await b.sk.post('/v1/send', { to: 'refused@example.org', from: FROM, subject: 'x', body: 'b' });
    const email = await waitForStatus(b.sk, res.body.data.emails[0].email, ['FAILED']);
    assert.match(email.error, /554 message refused/);
  });
});

describe('idempotency', () => {
  test('a reused key is 409 with the original request, and nothing is sent twice', async () => {
    const body = { to: 'idem@example.org', from: FROM, subject: 'once', body: 'b' };
    const first = await b.sk.post('/v1/send', body, { headers: { 'Idempotency-Key': 'order-1001' } });
    assert.equal(first.status, 200);
    const second = await b.sk.post('/v1/send', body, { headers: { 'Idempotency-Key': 'order-1001' } });
    assert.equal(second.status, 409);
    assert.equal(second.body.error.code, 'IDEMPOTENCY_KEY_REUSED');
    const d = second.body.error.details;
    assert.equal(d.key, 'order-1001');
    assert.equal(d.originalRequest, 'POST /v1/send');
    assert.equal(d.originalStatusCode, 200);
    assert.deepEqual(d.originalResponse, first.body);
    assert.ok(!Number.isNaN(Date.parse(d.originalRequestAt)));
    const listed = await b.sk.get(`/emails?contactId=${first.body.data.emails[0].contact.id}`);
    assert.equal(listed.body.total, 1);
  });

  test('two concurrent requests with one key: exactly one is performed', async () => {
    const body = { to: 'race@example.org', from: FROM, subject: 'race', body: 'b' };
    const results = await Promise.all(Array.from({ length: 5 }, () => b.sk.post('/v1/send', body, { headers: { 'Idempotency-Key': 'race-key' } })));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409, 409]);
    const rows = await server.sql(`SELECT id FROM emails WHERE to_email = 'race@example.org'`);
    assert.equal(rows.length, 1);
  });

  test('a 4xx outcome releases the key; bad keys are 422', async () => {
    const bad = await b.sk.post('/v1/send', { to: 'x@example.org', from: FROM, subject: 'a\nb', body: 'b' }, { headers: { 'Idempotency-Key': 'k-retry' } });
    assert.equal(bad.status, 422);
    const good = await b.sk.post('/v1/send', { to: 'x@example.org', from: FROM, subject: 'ok', body: 'b' }, { headers: { 'Idempotency-Key': 'k-retry' } });
    assert.equal(good.status, 200);
    const long = await b.sk.post(
      '/v1/send',
      { to: 'x@example.org', from: FROM, subject: 'ok', body: 'b' },
      { headers: { 'Idempotency-Key': 'k'.repeat(256) } },
    );
    assert.equal(long.status, 422);
    assert.equal(long.body.error.errors[0].field, 'Idempotency-Key');
    const tab = await b.sk.post('/v1/send', { to: 'x@example.org', from: FROM, subject: 'ok', body: 'b' }, { headers: { 'Idempotency-Key': 'a\tb' } });
    assert.equal(tab.status, 422);
  });
});

describe('bad input sends nothing', () => {
  const cases: [string, Record<string, unknown>, number, string?][] = [
    ['subject with a newline', { subject: 'a\nb' }, 422, 'subject'],
    ['subject of 999 characters', { subject: 's'.repeat(999) }, 422, 'subject'],
    ['header name with CR', { headers: { 'X-A\rB': 'v' } }, 422],
    ['header value of 999 characters', { headers: { 'X-Long': 'v'.repeat(999) } }, 422],
    [
      '11 attachments',
      { attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `${i}.txt`, content: 'aGk=', contentType: 'text/plain' })) },
      422,
      'attachments',
    ],
    ['non-base64 attachment', { attachments: [{ filename: 'a.txt', content: 'not base64!!', contentType: 'text/plain' }] }, 422, 'attachments.0.content'],
    ['base64 padding inside', { attachments: [{ filename: 'a.txt', content: 'aG=kaGk=', contentType: 'text/plain' }] }, 422, 'attachments.0.content'],
    [
      'base64 of a length not a multiple of four',
      { attachments: [{ filename: 'a.txt', content: 'aGk', contentType: 'text/plain' }] },
      422,
      'attachments.0.content',
    ],
    [
      'base64 with three padding characters',
      { attachments: [{ filename: 'a.txt', content: 'a===', contentType: 'text/plain' }] },
      422,
      'attachments.0.content',
    ],
    ['empty to', { to: '' }, 422, 'to'],
    ['to not an email', { to: 'not-an-email' }, 422, 'to'],
    ['to as an empty array', { to: [] }, 422, 'to'],
    ['no subject without a template', { subject: undefined }, 422, 'subject'],
  ];
  for (const [name, patch, status, field] of cases) {
    test(name, async () => {
      const before = (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM emails'))[0].n;
      const res = await b.sk.post('/v1/send', { to: 'bad@example.org', from: FROM, subject: 'ok', body: 'b', ...patch });
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      if (field)
        assert.ok(
          res.body.error.errors.some((e: { field: string }) => e.field.startsWith(field)),
          res.text,
        );
      const after = (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM emails'))[0].n;
      assert.equal(after, before);
    });
  }

  test('unknown keys are refused with unrecognized_keys, and a likely mistake says what to use', async () => {
    const before = (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM emails'))[0].n;
    const res = await b.sk.post('/v1/send', {
      to: 'strict@example.org',
      from: FROM,
      subject: 's',
      body: 'b',
      replyTo: 'support@example.org',
      cc: 'boss@example.org',
      bcc: 'audit@example.org',
      text: 'plain',
      type: 'MARKETING',
      extra: 1,
    });
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'VALIDATION_ERROR');
    const unknown = res.body.error.errors.find((e: { code: string }) => e.code === 'unrecognized_keys');
    assert.match(unknown.message, /'replyTo', 'cc', 'bcc', 'text', 'extra'/);
    // `type` is known, as Plunk's client sends it: only 'html' (its plunk.test sends that).
    assert.deepEqual(
      res.body.error.errors.filter((e: { field: string }) => e.field === 'type').map((e: { message: string }) => e.message),
      ["Only 'html' (the body is HTML)"],
    );
    const suggestion: string = res.body.error.suggestion;
    assert.match(suggestion, /replyTo: use 'reply'/);
    assert.match(suggestion, /cc: there is no cc: list each recipient in 'to'/);
    assert.match(suggestion, /bcc: there is no bcc/);
    assert.match(suggestion, /text: there is no plain-text field: the plain text is generated/);
    assert.match(suggestion, /type: .*campaign/);
    assert.doesNotMatch(suggestion, /extra/);
    const attachment = await b.sk.post('/v1/send', {
      to: 'strict@example.org',
      from: FROM,
      subject: 's',
      body: 'b',
      attachments: [{ filename: 'a.txt', content: 'aGk=', encoding: 'base64' }],
    });
    assert.equal(attachment.status, 422, attachment.text);
    assert.equal(attachment.body.error.errors[0].field, 'attachments.0');
    assert.equal(attachment.body.error.errors[0].code, 'unrecognized_keys');
    const after = (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM emails'))[0].n;
    assert.equal(after, before);
    assert.equal((await server.sql(`SELECT 1 FROM contacts WHERE email = 'strict@example.org'`)).length, 0);
  });

  test('headers Herald or the mail servers write are refused with 422 naming the header; others are sent', async () => {
    const reserved = [
      'Content-Disposition',
      'content-type',
      'Content-Language',
      'MIME-Version',
      'Received',
      'Return-Path',
      'Errors-To',
      'Resent-From',
      'Authentication-Results',
      'ARC-Seal',
      'DKIM-Signature',
      'List-Unsubscribe',
      'Message-ID',
      'From',
    ];
    for (const name of reserved) {
      const res = await b.sk.post('/v1/send', {
        to: 'hdr@example.org',
        from: FROM,
        subject: 's',
        body: 'b',
        headers: { [name]: 'attachment; filename=x.exe' },
      });
      assert.equal(res.status, 422, `${name}: ${res.text}`);
      assert.deepEqual(res.body.error.errors, [
        { field: `headers.${name}`, code: 'custom', message: `Header ${name} is reserved: Herald or the mail servers on the way write it` },
      ]);
    }
    assert.equal((await server.sql(`SELECT 1 FROM contacts WHERE email = 'hdr@example.org'`)).length, 0);
    const ok = await b.sk.post('/v1/send', {
      to: 'hdr@example.org',
      from: FROM,
      subject: 's',
      body: 'b',
      headers: { 'X-Content-Id': '7', 'List-Id': '<news.example.org>' },
    });
    assert.equal(ok.status, 200, ok.text);
  });

  test('unknown template id → 404 TEMPLATE_NOT_FOUND', async () => {
    const res = await b.sk.post('/v1/send', { to: 'bad@example.org', template: '0190a0a0-0000-7000-8000-000000000000' });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'TEMPLATE_NOT_FOUND');
  });

  test('from on an unverified or foreign domain → 403 naming the domain', async () => {
    const other = await bootstrap(server.api, 'Other');
    await verifyDomain(other.sk, dns, 'other.example.test');
    for (const from of ['me@unverified.example.test', 'me@other.example.test']) {
      const res = await b.sk.post('/v1/send', { to: 'bad@example.org', from, subject: 's', body: 'b' });
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'INTERNAL_SERVER_ERROR');
      assert.match(res.body.error.message, new RegExp(from.split('@')[1].replaceAll('.', '\\.')));
    }
    const contacts = await server.sql(`SELECT 1 FROM contacts WHERE email = 'bad@example.org'`);
    assert.equal(contacts.length, 0, 'no contact was created by a refused send');
  });

  test('a public key is refused', async () => {
    const res = await b.pk.post('/v1/send', { to: 'bad@example.org', from: FROM, subject: 's', body: 'b' });
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'INVALID_API_KEY');
  });
});
