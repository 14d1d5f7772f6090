import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { signTrackingToken } from '../src/mail/tracking.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** Issue 14 finding 10: click and open links expire (TRACKING_LINK_TTL_DAYS); an expired click names its destination. */

const SECRET = 'test-secret-0123456789abcdef'; // the JWT_SECRET of test servers
const DAY = 86_400_000;
let server: TestServer;

before(async () => {
  server = await startTestServer({ TRACKING_LINK_TTL_DAYS: '30' });
});
after(async () => {
  await server?.stop();
});

const get = (path: string) => fetch(`${server.url}${path}`, { redirect: 'manual' });
const URL_ = 'https://shop.example.com/sale?a=1&b=<2>';

/** A version-1 token (no signing time), as emails sent before expiry existed carry. */
function legacyClickToken(emailId: string, url: string): string {
  const key = createHmac('sha256', SECRET).update('herald tracking tokens v1').digest();
  const body = Buffer.concat([Buffer.from([1, 0x63]), Buffer.from(emailId.replaceAll('-', ''), 'hex'), Buffer.from(url)]);
  return Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 12)]).toString('base64url');
}

describe('tracking link expiry', () => {
  test("a click link younger than the TTL redirects while its email exists; a gone email's is 404", async () => {
    const b = await bootstrap(server.api);
    const sent = await b.sk.post('/v1/send', { to: 'reader@example.org', from: 'hi@sandbox.herald.test', subject: 'S', body: '<p>B</p>' });
    assert.equal(sent.status, 200, sent.text);
    const signedAt = new Date(Date.now() - 29 * DAY);
    const res = await get(`/t/c/${signTrackingToken(SECRET, { kind: 'click', emailId: sent.body.data.emails[0].email, url: URL_ }, signedAt)}`);
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), new URL(URL_).href);
    const gone = await get(`/t/c/${signTrackingToken(SECRET, { kind: 'click', emailId: randomUUID(), url: URL_ }, signedAt)}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.headers.get('location'), null);
  });

  test('an expired click link shows a page naming the destination and does not redirect', async () => {
    const token = signTrackingToken(SECRET, { kind: 'click', emailId: randomUUID(), url: URL_ }, new Date(Date.now() - 31 * DAY));
    const res = await get(`/t/c/${token}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('location'), null);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    const html = await res.text();
    assert.match(html, /This link has expired/);
    assert.ok(html.includes('https://shop.example.com/sale?a=1&amp;b=%3C2%3E'), html);
  });

  test('a legacy token without a time expires with its email (gone: expired)', async () => {
    const res = await get(`/t/c/${legacyClickToken(randomUUID(), URL_)}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('location'), null);
  });

  test('an expired open pixel still answers the image but records nothing', async () => {
    const token = signTrackingToken(SECRET, { kind: 'open', emailId: randomUUID() }, new Date(Date.now() - 400 * DAY));
    const res = await get(`/t/o/${token}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'image/gif');
  });
});
