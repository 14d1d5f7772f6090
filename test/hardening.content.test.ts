import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';

/**
 * Issue 14 finding 5: /v1/send stores what a request shares (body, one-off variables, headers,
 * attachments) once, not once per recipient. Random (incompressible) content, so the sizes
 * PostgreSQL reports are the sizes sent.
 */

let env: MailEnv;
let b: Bootstrapped;
const FROM = 'app@mail.example.test';

before(async () => {
  env = await startMailEnv();
  b = await bootstrap(env.server.api);
  await verifyDomain(b.sk, env.dns, 'mail.example.test');
});
after(async () => {
  await env?.stop();
});

/** Bytes of the emails and their contents on disk, TOAST and indexes included. */
async function storedBytes(): Promise<number> {
  const [row] = await env.server.sql<{ bytes: string }>(`SELECT pg_total_relation_size('emails') + pg_total_relation_size('email_contents') AS bytes`);
  return Number(row.bytes);
}

const randomText = (chars: number) =>
  randomBytes(Math.ceil((chars * 3) / 4))
    .toString('base64')
    .slice(0, chars)
    .replace(/[+/]/g, 'x');

describe('a /v1/send to 50 recipients stores its content once', () => {
  test('a 2 MB request to 50 recipients grows the database by about one copy, and each recipient gets the right message', async () => {
    // Most of the body is a Liquid comment: stored like any body, cheap to deliver 50 times.
    const filler = randomText(100_000);
    const hidden = randomText(1_300_000);
    const coupon = randomText(200_000);
    const attachment = randomBytes(300_000);
    const recipients = Array.from({ length: 50 }, (_, i) => `r${i}@example.org`);
    const request = {
      to: recipients,
      from: FROM,
      subject: 'For {{email}}',
      body: `<p>Hello {{email}}, coupon {{coupon | slice: 0, 12}}</p><p>${filler}</p>{% comment %}${hidden}{% endcomment %}`,
      data: { coupon: { value: coupon, persistent: false } },
      headers: { 'X-Batch': 'content-once' },
      attachments: [{ filename: 'blob.bin', content: attachment.toString('base64'), contentType: 'application/octet-stream' }],
    };
    const requestBytes = Buffer.byteLength(JSON.stringify(request));
    assert.ok(requestBytes > 2_000_000 && requestBytes < 2_200_000, `request is ${requestBytes} bytes`);

    const before = await storedBytes();
    const res = await b.sk.post('/v1/send', request);
    assert.equal(res.status, 200, res.text);
    const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);
    assert.equal(ids.length, 50);
    const grown = (await storedBytes()) - before;
    // One copy of the request plus 50 small email rows; 50 copies would be 100 MB.
    assert.ok(grown < requestBytes * 1.25, `stored ${grown} bytes for a ${requestBytes}-byte request`);
    const [shared] = await env.server.sql<{ contents: number }>('SELECT count(DISTINCT content_id)::int AS contents FROM emails WHERE id = ANY($1::uuid[])', [
      ids,
    ]);
    assert.equal(shared.contents, 1);

    await env.sink.waitFor(50, 60_000);
    for (const [i, id] of ids.entries()) {
      const email = await waitForStatus(b.sk, id, ['SENT']);
      assert.equal(email.to, recipients[i]);
      assert.equal(email.subject, `For ${recipients[i]}`);
      const msg = env.sink.messages.find((m) => m.envelope.to.includes(recipients[i]));
      assert.ok(msg, `a message reached ${recipients[i]}`);
      assert.equal(msg.envelope.to.length, 1);
      assert.equal(msg.parsed.subject, `For ${recipients[i]}`);
      assert.equal(msg.parsed.messageId, `<${id}@mail.example.test>`);
      const html = String(msg.parsed.html);
      assert.ok(html.startsWith(`<p>Hello ${recipients[i]}, coupon ${coupon.slice(0, 12)}</p>`), html.slice(0, 80));
      assert.ok(html.includes(filler), 'the whole body arrived');
      assert.ok(!html.includes(hidden.slice(0, 100)), 'the comment was not rendered');
      assert.equal(msg.parsed.headers.get('x-batch'), 'content-once');
      assert.equal(msg.parsed.attachments.length, 1);
      assert.equal(msg.parsed.attachments[0].filename, 'blob.bin');
      assert.ok(msg.parsed.attachments[0].content.equals(attachment), 'the attachment arrived intact');
    }
  });

  test('persistent data is stored on every recipient: 50 × 100 KB is refused (422 on data) and nothing is written; one-off, it is sent', async () => {
    const big = randomText(100_000);
    const to = Array.from({ length: 50 }, (_, i) => `p${i}@example.org`);
    const [{ n: before }] = await env.server.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts');
    const refused = await b.sk.post('/v1/send', { to, from: FROM, subject: 'S', body: 'B', data: { big } });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(
      refused.body.error.errors.map((e: { field: string }) => e.field),
      ['data'],
    );
    assert.match(refused.body.error.errors[0].message, /data stored on 50 contacts would take 4884 KB \(at most 2 MB per request\)/);
    const [{ n: after }] = await env.server.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts');
    assert.equal(after, before);

    const alone = await b.sk.post('/v1/send', { to: to[0], from: FROM, subject: 'S', body: 'B', data: { big } });
    assert.equal(alone.status, 200, 'one recipient may use the whole data cap');
    const oneOff = await b.sk.post('/v1/send', { to, from: FROM, subject: 'S', body: '{{big | size}}', data: { big: { value: big, persistent: false } } });
    assert.equal(oneOff.status, 200, oneOff.text);
  });

  test('more than 100 custom headers are refused (422), so headers too stay bounded', async () => {
    const headers = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`X-H${i}`, 'v']));
    const res = await b.sk.post('/v1/send', { to: 'h@example.org', from: FROM, subject: 'S', body: 'B', headers });
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(
      res.body.error.errors.map((e: { field: string }) => e.field),
      ['headers'],
    );
  });
});

describe('a subject that renders longer than a header line', () => {
  test('fails its email with the reason (nothing sent or stored of it); 998 characters are sent', async () => {
    const send = async (subject: string, bio: string) => {
      const res = await b.sk.post('/v1/send', { to: 'subject@example.org', from: FROM, subject, body: 'B', data: { bio: { value: bio, persistent: false } } });
      assert.equal(res.status, 200, res.text);
      return res.body.data.emails[0].email as string;
    };
    const fits = await waitForStatus(b.sk, await send('Hello, {{bio}}', 'x'.repeat(991)), ['SENT', 'DELIVERED']);
    assert.equal(fits.subject.length, 998);
    const overByData = await waitForStatus(b.sk, await send('Hello, {{bio}}', 'x'.repeat(992)), ['FAILED']);
    assert.equal(overByData.error, 'The rendered subject is 999 characters long; at most 998');
    const overByLoop = await waitForStatus(b.sk, await send('{% for i in (1..50000) %}abcdefghij{% endfor %}', ''), ['FAILED']);
    assert.equal(overByLoop.error, 'The rendered subject is 500,000 characters long; at most 998');
    for (const failed of [overByData, overByLoop]) {
      const [{ chars }] = await env.server.sql<{ chars: number }>('SELECT length(subject)::int AS chars FROM emails WHERE id = $1', [failed.id]);
      assert.ok(chars <= 998, `${chars}`);
      const events = await b.sk.get(`/events?contactId=${failed.contactId}&limit=100`);
      assert.ok(JSON.stringify(events.body).length < 20_000, 'no event carries the long subject');
    }
    assert.deepEqual(
      env.sink.messages.filter((m) => m.envelope.to.includes('subject@example.org')).map((m) => m.parsed.subject?.length),
      [998],
    );
  });
});

describe('emails with large attachments are delivered one at a time per batch', () => {
  test('two sends with different large attachments and one without, queued together: every message carries its own attachment', async () => {
    // 400 KB of base64 each: over the 256 KB above which a batch reads attachments one email at a time.
    const first = randomBytes(300_000);
    const second = randomBytes(300_000);
    const send = (to: string[], attachment: Buffer | null, name: string) =>
      b.sk.post('/v1/send', {
        to,
        from: FROM,
        subject: `${name} for {{email}}`,
        body: `<p>${name}</p>`,
        ...(attachment ? { attachments: [{ filename: `${name}.bin`, content: attachment.toString('base64'), contentType: 'application/octet-stream' }] } : {}),
      });
    const groups = [
      { name: 'first', attachment: first, to: ['h1@example.org', 'h2@example.org', 'h3@example.org'] },
      { name: 'plain', attachment: null, to: ['l1@example.org', 'l2@example.org', 'l3@example.org'] },
      { name: 'second', attachment: second, to: ['k1@example.org', 'k2@example.org'] },
    ];
    const sent = await Promise.all(groups.map((g) => send(g.to, g.attachment, g.name)));
    for (const res of sent) assert.equal(res.status, 200, res.text);
    for (const [i, g] of groups.entries()) {
      for (const [j, to] of g.to.entries()) {
        const email = await waitForStatus(b.sk, sent[i].body.data.emails[j].email, ['SENT']);
        assert.equal(email.subject, `${g.name} for ${to}`);
        const msg = env.sink.messages.find((m) => m.envelope.to.includes(to));
        assert.ok(msg, `a message reached ${to}`);
        assert.equal(msg.parsed.subject, `${g.name} for ${to}`);
        if (!g.attachment) {
          assert.equal(msg.parsed.attachments.length, 0, `${to} got no attachment`);
          continue;
        }
        assert.equal(msg.parsed.attachments.length, 1);
        assert.equal(msg.parsed.attachments[0].filename, `${g.name}.bin`);
        assert.ok(msg.parsed.attachments[0].content.equals(g.attachment), `${to} got its own attachment intact`);
      }
    }
  });
});
