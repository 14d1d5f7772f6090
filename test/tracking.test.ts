import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { applyTracking, signTrackingToken, verifyTrackingToken } from '../src/mail/tracking.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';

const SECRET = 'test-secret-0123456789abcdef'; // the JWT_SECRET of test servers
let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;

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

const BODY = [
  '<html><body>',
  '<p>Hello {{email}}</p>',
  '<a href="https://shop.example.com/pricing?a=1&amp;b=2">Pricing</a>',
  "<a class='x' href='http://blog.example.com/post'>Blog</a>",
  '<a href="mailto:help@example.com">Mail us</a>',
  '<a href="#top">Top</a>',
  '<a href="javascript:alert(1)">Script</a>',
  '<a href="{{manageUrl}}">Preferences</a>',
  '</body></html>',
].join('\n');

async function template(sk: Api, type: string, body = BODY, from = 'news@mail.example.test') {
  const res = await sk.post('/templates', { name: `t-${Math.random()}`, subject: 'News for {{email}}', body, from, type });
  assert.equal(res.status, 201, res.text);
  return res.body.id as string;
}

/** Sends the template to `to`, waits until it is SENT, returns the email id, contact id and the HTML that arrived. */
async function sendAndReceive(sk: Api, templateId: string, to: string) {
  const res = await sk.post('/v1/send', { to, template: templateId, subscribed: true });
  assert.equal(res.status, 200, res.text);
  const [item] = res.body.data.emails;
  assert.equal(item.status, 'QUEUED');
  await waitForStatus(sk, item.email, ['SENT']);
  const msg = sink.messages.find((m) => m.envelope.to.includes(to));
  assert.ok(msg, 'the message reached the SMTP sink');
  return { emailId: item.email as string, contactId: item.contact.id as string, html: String(msg.parsed.html), text: String(msg.parsed.text) };
}

const hrefs = (html: string) => [...html.matchAll(/href=["']([^"']*)["']/g)].map((m) => m[1]);
const pathOf = (url: string) => new URL(url).pathname;
const clickLinks = (html: string) => hrefs(html).filter((h) => h.includes('/t/c/'));
const pixelOf = (html: string) => /<img src="([^"]*\/t\/o\/[^"]*)" width="1" height="1" alt=""/.exec(html)?.[1];

async function eventsOf(contactId: string) {
  return server.sql<{ name: string; data: Record<string, unknown> }>(
    `SELECT name, data FROM events WHERE contact_id = $1 AND name LIKE 'email.%' ORDER BY created_at, id`,
    [contactId],
  );
}

describe('open and click tracking', () => {
  test('links are rewritten and a pixel added; opening and clicking count on the email and record events', async () => {
    const tpl = await template(b.sk, 'MARKETING');
    const { emailId, contactId, html } = await sendAndReceive(b.sk, tpl, 'reader@example.org');

    const links = clickLinks(html);
    assert.equal(links.length, 2, 'both http(s) links are tracked');
    for (const l of links) assert.match(l, /^http:\/\/localhost:0\/t\/c\/[A-Za-z0-9_-]+$/);
    const all = hrefs(html);
    assert.ok(all.includes('mailto:help@example.com'), 'mailto links stay');
    assert.ok(all.includes('#top'), 'anchors stay');
    assert.ok(all.includes('javascript:alert(1)'), 'non-http links are not tracked');
    assert.ok(
      all.some((h) => /\/manage\/[^/]+$/.test(h)),
      'the manage link stays direct',
    );
    assert.ok(
      all.some((h) => /\/unsubscribe\/[^/]+$/.test(h)),
      'the footer unsubscribe link stays direct',
    );
    assert.ok(!html.includes('shop.example.com'), 'the original URL is not in the HTML any more');
    const pixel = pixelOf(html);
    assert.ok(pixel, 'the open pixel is in the HTML');
    assert.ok(html.indexOf(pixel) < html.indexOf('</body>'), 'the pixel sits inside the body');

    const before = await b.sk.get(`/emails/${emailId}`);
    assert.equal(before.body.openCount, 0);
    assert.equal(before.body.openedAt, null);

    const open = await server.api.get(pathOf(pixel));
    assert.equal(open.status, 200);
    assert.equal(open.headers.get('content-type'), 'image/gif');
    assert.match(open.headers.get('cache-control') ?? '', /no-store/);
    assert.match(open.headers.get('cache-control') ?? '', /no-cache/);
    const gif = Buffer.from(await (await fetch(server.url + pathOf(pixel))).arrayBuffer());
    assert.equal(gif.subarray(0, 6).toString('latin1'), 'GIF89a');
    assert.equal(gif.readUInt16LE(6), 1, 'width 1');
    assert.equal(gif.readUInt16LE(8), 1, 'height 1');

    const opened = await b.sk.get(`/emails/${emailId}`);
    assert.equal(opened.body.openCount, 2);
    assert.ok(!Number.isNaN(Date.parse(opened.body.openedAt)));
    assert.equal(opened.body.clickCount, 0);
    assert.equal(opened.body.status, 'SENT', 'opens are counters, not a status');

    const click = await server.api.get(pathOf(links[0]));
    assert.equal(click.status, 302);
    assert.equal(click.headers.get('location'), 'https://shop.example.com/pricing?a=1&b=2');
    const click2 = await server.api.get(pathOf(links[1]));
    assert.equal(click2.headers.get('location'), 'http://blog.example.com/post');

    const clicked = await b.sk.get(`/emails/${emailId}`);
    assert.equal(clicked.body.clickCount, 2);
    assert.equal(clicked.body.openCount, 2);
    assert.ok(Date.parse(clicked.body.clickedAt) >= Date.parse(clicked.body.openedAt));

    const events = await eventsOf(contactId);
    assert.deepEqual(
      events.map((e) => e.name),
      ['email.sent', 'email.opened', 'email.opened', 'email.clicked', 'email.clicked'],
    );
    const firstClick = events.find((e) => e.name === 'email.clicked')!;
    assert.deepEqual(firstClick.data, {
      emailId,
      subject: 'News for reader@example.org',
      templateId: tpl,
      link: 'https://shop.example.com/pricing?a=1&b=2',
    });
    assert.deepEqual(events.find((e) => e.name === 'email.opened')!.data, { emailId, subject: 'News for reader@example.org', templateId: tpl });
  });

  test('a click without a recorded open also counts as the first open', async () => {
    const tpl = await template(b.sk, 'MARKETING');
    const { emailId, contactId, html } = await sendAndReceive(b.sk, tpl, 'clicker@example.org');
    const res = await server.api.get(pathOf(clickLinks(html)[1]));
    assert.equal(res.status, 302);
    const email = await b.sk.get(`/emails/${emailId}`);
    assert.equal(email.body.openCount, 1);
    assert.equal(email.body.clickCount, 1);
    assert.equal(email.body.openedAt, email.body.clickedAt);
    assert.deepEqual(
      (await eventsOf(contactId)).map((e) => e.name),
      ['email.sent', 'email.opened', 'email.clicked'],
    );
  });

  test("HEAD (a link scanner's) answers as GET without counting; a deleted project's links redirect no more", async () => {
    const other = await bootstrap(server.api, 'Gone soon');
    await verifyDomain(other.sk, dns, 'gone.example.test');
    const tpl = await template(other.sk, 'MARKETING', BODY, 'news@gone.example.test');
    const { emailId, html } = await sendAndReceive(other.sk, tpl, 'scanned@example.org');
    const [pixel, link] = [pathOf(pixelOf(html)!), pathOf(clickLinks(html)[0])];
    const head = (path: string) => fetch(server.url + path, { method: 'HEAD', redirect: 'manual' });
    const [headOpen, headClick] = [await head(pixel), await head(link)];
    assert.deepEqual([headOpen.status, headOpen.headers.get('content-type')], [200, 'image/gif']);
    assert.deepEqual([headClick.status, headClick.headers.get('location')], [302, 'https://shop.example.com/pricing?a=1&b=2']);
    const email = await other.sk.get(`/emails/${emailId}`);
    assert.deepEqual([email.body.openCount, email.body.clickCount], [0, 0]);

    assert.equal((await server.api.delete(`/users/@me/projects/${other.project.id}`, { cookie: other.cookie })).status, 204);
    const deadline = Date.now() + 15_000;
    while ((await server.sql('SELECT 1 FROM emails WHERE id = $1', [emailId])).length > 0) {
      assert.ok(Date.now() < deadline, 'the project was purged');
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const res of [await server.api.get(link), await head(link)]) {
      assert.equal(res.status, 404);
      assert.equal(res.headers.get('location'), null);
    }
    assert.equal((await server.api.get(pixel)).status, 200, 'the pixel still answers its image');
  });

  test('a flood of one email’s pixel and links is written a group at a time: every hit counted, no connection held waiting on its row', async () => {
    const tpl = await template(b.sk, 'MARKETING');
    const { emailId, contactId, html } = await sendAndReceive(b.sk, tpl, 'flood@example.org');
    const [pixel, link] = [pathOf(pixelOf(html)!), pathOf(clickLinks(html)[0])];
    // Sessions of this database waiting on a row lock, sampled while the hits run (anyone holding
    // the link can replay it; each waiting session is a pooled connection other tenants wait for).
    let sampling = true;
    let mostWaiting = 0;
    const sampler = (async () => {
      while (sampling) {
        const [{ n }] = await server.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        mostWaiting = Math.max(mostWaiting, n);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    // An open first: a click recorded before any open counts an open of its own (as a lone click does).
    const first = await server.api.get(pixel);
    const hits = [first, ...(await Promise.all(Array.from({ length: 239 }, (_, i) => server.api.get((i + 1) % 3 === 2 ? link : pixel))))];
    sampling = false;
    await sampler;
    assert.deepEqual([hits.filter((h) => h.status === 200).length, hits.filter((h) => h.status === 302).length], [160, 80]);
    const email = await b.sk.get(`/emails/${emailId}`);
    assert.deepEqual([email.body.openCount, email.body.clickCount], [160, 80]);
    const events = await eventsOf(contactId);
    assert.deepEqual([events.filter((e) => e.name === 'email.opened').length, events.filter((e) => e.name === 'email.clicked').length], [160, 80]);
    assert.ok(mostWaiting <= 1, `${mostWaiting} sessions waited on a row lock at once`);
  });

  test('a link longer than a router parameter still redirects', async () => {
    const long = `https://shop.example.com/${'p'.repeat(1500)}?q=1`;
    const tpl = await template(b.sk, 'MARKETING', `<p><a href="${long}">long</a></p>`);
    const { html } = await sendAndReceive(b.sk, tpl, 'long@example.org');
    const [link] = clickLinks(html);
    assert.ok(link.length > 1500);
    const res = await server.api.get(pathOf(link));
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), long);
  });
});

describe('the project tracking setting', () => {
  let n = 0;
  async function projectWith(tracking: string) {
    const p = await bootstrap(server.api, `tracking ${tracking}`);
    const patched = await server.api.patch(`/users/@me/projects/${p.project.id}`, { tracking }, { cookie: p.cookie });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.tracking, tracking);
    const domain = `t${++n}.example.test`;
    await verifyDomain(p.sk, dns, domain);
    return { p, from: `hi@${domain}` };
  }

  test('MARKETING_ONLY tracks marketing mail and leaves transactional mail untouched', async () => {
    const { p, from } = await projectWith('MARKETING_ONLY');
    const tx = await sendAndReceive(p.sk, await template(p.sk, 'TRANSACTIONAL', BODY, from), 'tx-only@example.org');
    assert.equal(clickLinks(tx.html).length, 0);
    assert.equal(pixelOf(tx.html), undefined);
    assert.ok(hrefs(tx.html).includes('https://shop.example.com/pricing?a=1&amp;b=2'));
    const mk = await sendAndReceive(p.sk, await template(p.sk, 'MARKETING', BODY, from), 'mk-only@example.org');
    assert.equal(clickLinks(mk.html).length, 2);
    assert.ok(pixelOf(mk.html));
  });

  test('DISABLED tracks nothing', async () => {
    const { p, from } = await projectWith('DISABLED');
    const mk = await sendAndReceive(p.sk, await template(p.sk, 'MARKETING', BODY, from), 'untracked@example.org');
    assert.equal(clickLinks(mk.html).length, 0);
    assert.equal(pixelOf(mk.html), undefined);
    assert.ok(hrefs(mk.html).includes('http://blog.example.com/post'));
  });

  test('ENABLED (the default) tracks transactional mail too', async () => {
    const tx = await sendAndReceive(b.sk, await template(b.sk, 'TRANSACTIONAL'), 'tx-tracked@example.org');
    assert.equal(clickLinks(tx.html).length, 2);
    assert.ok(pixelOf(tx.html));
  });
});

describe('forged and altered tracking tokens', () => {
  let emailId: string;
  let openToken: string;
  let clickToken: string;

  before(async () => {
    const tpl = await template(b.sk, 'MARKETING');
    const sent = await sendAndReceive(b.sk, tpl, 'target@example.org');
    emailId = sent.emailId;
    openToken = pathOf(pixelOf(sent.html)!).split('/').pop()!;
    clickToken = pathOf(clickLinks(sent.html)[0]).split('/').pop()!;
  });

  /** The token with one byte of its decoded content changed. */
  const flipByte = (token: string, at: number) => {
    const raw = Buffer.from(token, 'base64url');
    raw[at] ^= 0x01;
    return raw.toString('base64url');
  };

  async function assertUntouched() {
    const email = await b.sk.get(`/emails/${emailId}`);
    assert.equal(email.body.openCount, 0);
    assert.equal(email.body.clickCount, 0);
  }

  test('an open token with one byte changed is 404 and counts nothing', async () => {
    for (const at of [0, 5, 20, 29]) {
      const res = await server.api.get(`/t/o/${flipByte(openToken, at)}`);
      assert.equal(res.status, 404, `byte ${at}`);
      assert.equal(res.body.error.code, 'LINK_NOT_FOUND');
    }
    // One character of the token changed, including the last one (which carries spare bits).
    const last = openToken.at(-1) === 'A' ? 'B' : 'A';
    assert.equal((await server.api.get(`/t/o/${openToken.slice(0, -1)}${last}`)).status, 404);
    await assertUntouched();
  });

  test('a click token with one byte changed is 404, never a redirect', async () => {
    const raw = Buffer.from(clickToken, 'base64url');
    for (const at of [1, 10, 25, raw.length - 15, raw.length - 1]) {
      const res = await server.api.get(`/t/c/${flipByte(clickToken, at)}`);
      assert.equal(res.status, 404, `byte ${at}`);
      assert.equal(res.headers.get('location'), null);
    }
    await assertUntouched();
  });

  test('a click token whose URL was changed to another host is 404', async () => {
    const raw = Buffer.from(clickToken, 'base64url');
    const url = 'https://shop.example.com/pricing?a=1&b=2';
    const start = raw.indexOf(Buffer.from(url));
    assert.ok(start > 0, 'the URL is inside the token');
    const evil = Buffer.concat([raw.subarray(0, start), Buffer.from('https://evil.example.net/pricing?a=1&b=2'), raw.subarray(start + url.length)]);
    const res = await server.api.get(`/t/c/${evil.toString('base64url')}`);
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('location'), null);
    await assertUntouched();
  });

  test('a correctly signed click token pointing at javascript: or data: is 404', async () => {
    for (const url of ['javascript:alert(document.cookie)', 'data:text/html,<script>alert(1)</script>', '//evil.example.net/']) {
      const token = signTrackingToken(SECRET, { kind: 'click', emailId, url });
      const res = await server.api.get(`/t/c/${token}`);
      assert.equal(res.status, 404, url);
      assert.equal(res.headers.get('location'), null);
    }
    await assertUntouched();
  });

  test('a token signed with another secret, a token of the wrong kind and garbage are 404', async () => {
    const foreign = signTrackingToken('another-secret-0123456789', { kind: 'click', emailId, url: 'https://shop.example.com/' });
    assert.equal((await server.api.get(`/t/c/${foreign}`)).status, 404);
    assert.equal((await server.api.get(`/t/c/${openToken}`)).status, 404, 'an open token is not a link');
    assert.equal((await server.api.get(`/t/o/${clickToken}`)).status, 404, 'a link token is not a pixel');
    assert.equal((await server.api.get('/t/o/not-a-token')).status, 404);
    assert.equal((await server.api.get('/t/c/%3Cscript%3E')).status, 404);
    assert.equal((await server.api.get('/t/c/')).status, 404);
    await assertUntouched();
  });

  test('the unaltered tokens still work afterwards', async () => {
    assert.equal((await server.api.get(`/t/o/${openToken}`)).status, 200);
    const res = await server.api.get(`/t/c/${clickToken}`);
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), 'https://shop.example.com/pricing?a=1&b=2');
  });
});

describe('tracking tokens', () => {
  test('are the bytes signed before the seventeenth session, so links in mail already sent keep working', () => {
    const at = new Date('2026-11-28T15:00:00Z');
    const emailId = '0193f1a2-7c4d-7e00-8a1b-2c3d4e5f6a7b';
    const url = 'https://example.com/blog/story-1?utm_source=newsletter&utm_medium=email';
    assert.equal(
      signTrackingToken(SECRET, { kind: 'click', emailId, url }, at),
      'AmMBk_GifE1-AIobLD1OX2p7awrscGh0dHBzOi8vZXhhbXBsZS5jb20vYmxvZy9zdG9yeS0xP3V0bV9zb3VyY2U9bmV3c2xldHRlciZ1dG1fbWVkaXVtPWVtYWls1psjpw50V0ntRPnW',
    );
    assert.equal(signTrackingToken(SECRET, { kind: 'open', emailId }, at), 'Am8Bk_GifE1-AIobLD1OX2p7awrscJ266sL5uecMsrN1bg');
  });

  test("one message's links and pixel are signed for its email, each with its own URL, at one signing time", () => {
    const emailId = '0193f1a2-7c4d-7e00-8a1b-2c3d4e5f6a7b';
    const links = Array.from({ length: 30 }, (_, i) => `<a href="https://shop.example.com/item-${i}">item ${i}</a>`).join('');
    const html = applyTracking(`<html><body>${links}</body></html>`, {
      emailId,
      publicUrl: 'https://herald.example',
      secret: SECRET,
      opens: true,
      clicks: true,
    });
    const tokens = [...html.matchAll(/herald\.example\/t\/[co]\/([A-Za-z0-9_-]+)/g)].map((m) => verifyTrackingToken(SECRET, m[1]));
    assert.equal(tokens.length, 31);
    assert.deepEqual(
      tokens.map((t) => (t?.kind === 'click' ? t.url : t?.kind)),
      [...Array.from({ length: 30 }, (_, i) => `https://shop.example.com/item-${i}`), 'open'],
    );
    assert.ok(tokens.every((t) => t?.emailId === emailId));
    assert.equal(new Set(tokens.map((t) => t?.issuedAt?.getTime())).size, 1);
  });
});
