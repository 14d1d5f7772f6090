import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import type { SinkMessage } from './helpers/smtp-sink.ts';

let env: MailEnv;
let b: Bootstrapped;
let campaignId: string;
const FROM = 'news@analytics.example.test';
const LINK = 'https://example.com/offer';

const htmlOf = (m: SinkMessage) => String(m.parsed.html);
const pathOf = (url: string) => new URL(url).pathname;

async function waitUntil(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  env = await startMailEnv();
  b = await bootstrap(env.server.api, 'Analytics');
  await verifyDomain(b.sk, env.dns, 'analytics.example.test');
  const recipients = ['a@an.test', 'b@an.test', 'c@an.test', 'd@an.test'];
  for (const email of recipients) assert.equal((await b.sk.post('/contacts', { email, subscribed: true })).status, 201);
  const c = await b.sk.post('/campaigns', { name: 'Launch', subject: 'Launch day', body: `<p>Hi <a href="${LINK}">see the offer</a></p>`, from: FROM });
  campaignId = c.body.data.id;
  // The first recipient's server refuses permanently: a hard bounce.
  env.sink.failNext({ stage: 'rcpt', code: 550, message: '5.1.1 no such user' });
  assert.equal((await b.sk.post(`/campaigns/${campaignId}/send`, {})).status, 200);
  await waitUntil('the campaign to finish', async () => (await b.sk.get(`/campaigns/${campaignId}`)).body.status === 'SENT');
  const received = env.sink.messages.filter((m) => m.parsed.subject === 'Launch day');
  assert.equal(received.length, 3);
  const [first, second] = received;
  const pixel = (m: SinkMessage) => /src="([^"]+\/t\/o\/[^"]+)"/.exec(htmlOf(m))![1];
  const click = (m: SinkMessage) => /href="([^"]+\/t\/c\/[^"]+)"/.exec(htmlOf(m))![1];
  // first: opened five times, clicked twice; second: clicked once (counts as opened), then unsubscribes.
  for (let i = 0; i < 5; i++) assert.equal((await env.server.api.get(pathOf(pixel(first)))).status, 200);
  for (let i = 0; i < 2; i++) assert.equal((await env.server.api.get(pathOf(click(first)))).status, 302);
  assert.equal((await env.server.api.get(pathOf(click(second)))).status, 302);
  const unsubscribe = /<(https?:[^>\s]+\/unsubscribe\/[^>\s]+)>/.exec(second.raw.toString('latin1'))![1];
  assert.equal(
    (
      await env.server.api.post(pathOf(unsubscribe), undefined, {
        raw: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      })
    ).status,
    200,
  );
  // Tracked events: signup three times by two contacts.
  for (const email of ['a@an.test', 'b@an.test', 'b@an.test']) assert.equal((await b.sk.post('/events/track', { email, event: 'signup' })).status, 200);
  await b.sk.post('/events/track', { email: 'c@an.test', event: 'purchase' });
});
after(async () => env?.stop());

const range = () => {
  const to = new Date(Date.now() + 60_000).toISOString();
  const from = new Date(Date.now() - 2 * 86_400_000).toISOString();
  return `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
};

describe('analytics', () => {
  test('timeseries totals equal /campaigns/:id/stats and /activity/stats for the same range', async () => {
    const r = range();
    const [series, stats, activity] = await Promise.all([
      b.sk.get(`/analytics/timeseries?interval=day&${r}`),
      b.sk.get(`/campaigns/${campaignId}/stats`),
      b.sk.get(`/activity/stats?${r}`),
    ]);
    assert.equal(series.status, 200, series.text);
    const t = series.body.totals;
    const s = stats.body;
    const a = activity.body.counts;
    assert.deepEqual(t, { sent: 4, delivered: 0, opened: 2, clicked: 2, bounced: 1, complained: 0, unsubscribed: 2 });
    // Unique per email, as the campaign's stats count them.
    assert.equal(t.sent, s.sentCount);
    assert.equal(t.delivered, s.deliveredCount);
    assert.equal(t.opened, s.openedCount);
    assert.equal(t.clicked, s.clickedCount);
    assert.equal(t.bounced, s.bouncedCount);
    assert.equal(t.complained, s.complainedCount);
    // One event per email for these, as the activity stats count them; the message the relay
    // refused at RCPT TO was sent and bounced for the stats, and has no email.sent event.
    assert.equal(t.sent, a['email.sent'] + 1);
    assert.equal(t.delivered, a['email.delivered']);
    assert.equal(t.bounced, a['email.bounced']);
    assert.equal(t.complained, a['email.complained']);
    assert.equal(t.unsubscribed, a['contact.unsubscribed']);
    // Opens are per email here, per open there.
    assert.equal(a['email.opened'], 6);
    // Zero-filled day buckets: three days, the sends all today.
    assert.equal(series.body.points.length, 3);
    assert.deepEqual(
      series.body.points.map((p: { sent: number }) => p.sent),
      [0, 0, 4],
    );
    assert.match(series.body.points[0].t, /T00:00:00Z$/);
  });

  test('buckets follow the project time zone; metric= narrows the points', async () => {
    await env.server.api.patch(`/users/@me/projects/${b.project.id}`, { timezone: 'Asia/Kolkata' }, { cookie: b.cookie });
    try {
      const res = await b.sk.get(`/analytics/timeseries?interval=day&metric=opened&${range()}`);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.timezone, 'Asia/Kolkata');
      assert.match(res.body.points[0].t, /T18:30:00Z$/);
      assert.deepEqual(Object.keys(res.body.points[0]).sort(), ['opened', 't']);
      assert.equal(res.body.totals.opened, 2);
      const hourly = await b.sk.get(`/analytics/timeseries?interval=hour&${range()}`);
      assert.equal(hourly.status, 200);
      assert.ok(hourly.body.points.length >= 48 && hourly.body.points.length <= 50, String(hourly.body.points.length));
      assert.equal(hourly.body.totals.sent, 4);
    } finally {
      await env.server.api.patch(`/users/@me/projects/${b.project.id}`, { timezone: 'UTC' }, { cookie: b.cookie });
    }
  });

  test('top-campaigns and campaign-stats agree with the campaign stats; links are counted', async () => {
    const stats = (await b.sk.get(`/campaigns/${campaignId}/stats`)).body;
    const top = await b.sk.get(`/analytics/top-campaigns?metric=clickRate&limit=5&${range()}`);
    assert.equal(top.status, 200, top.text);
    assert.equal(top.body.data.length, 1);
    const c = top.body.data[0];
    assert.equal(c.id, campaignId);
    assert.deepEqual(
      [c.sent, c.opens, c.clicks, c.bounced, c.openRate, c.clickRate],
      [stats.sentCount, stats.openedCount, stats.clickedCount, stats.bouncedCount, stats.openRate, stats.clickRate],
    );

    const one = await b.sk.get(`/analytics/campaign-stats?campaignId=${campaignId}&${range()}`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body.stats, stats);
    assert.deepEqual(one.body.links, [{ url: LINK, clicks: 3, uniqueClicks: 2 }]);
    const t = one.body.series.totals;
    assert.deepEqual(
      [t.sent, t.delivered, t.opened, t.clicked, t.bounced, t.complained],
      [stats.sentCount, stats.deliveredCount, stats.openedCount, stats.clickedCount, stats.bouncedCount, stats.complainedCount],
    );
    assert.deepEqual([t.sent, t.opened, t.bounced], [4, 2, 1], 'the message refused at RCPT TO counts as sent, at its bounce time');
  });

  test('top-events: tracked event names with counts and unique contacts', async () => {
    const res = await b.sk.get(`/analytics/top-events?limit=10&${range()}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.data, [
      { name: 'signup', count: 3, uniqueContacts: 2 },
      { name: 'purchase', count: 1, uniqueContacts: 1 },
    ]);
    const limited = await b.sk.get(`/analytics/top-events?limit=1&${range()}`);
    assert.equal(limited.body.data.length, 1);
  });

  test('bad input: from after to, a 5-year range, interval=minute, metric=bogus, unknown or foreign campaignId', async () => {
    const other = await bootstrap(env.server.api, 'Other');
    await verifyDomain(other.sk, env.dns, 'other.example.test');
    const foreign = await other.sk.post('/campaigns', { name: 'X', subject: 'S', body: '<p>B</p>', from: 'x@other.example.test' });
    const cases: [string, number, string][] = [
      ['/analytics/timeseries?from=2026-05-01&to=2026-04-01', 422, 'VALIDATION_ERROR'],
      ['/analytics/timeseries?from=2020-01-01&to=2025-01-01', 400, 'BAD_REQUEST'],
      ['/analytics/top-events?from=2020-01-01&to=2025-01-01', 400, 'BAD_REQUEST'],
      ['/analytics/timeseries?interval=minute', 422, 'VALIDATION_ERROR'],
      ['/analytics/timeseries?metric=bogus', 422, 'VALIDATION_ERROR'],
      ['/analytics/top-campaigns?metric=bogus', 422, 'VALIDATION_ERROR'],
      ['/analytics/top-campaigns?limit=0', 422, 'VALIDATION_ERROR'],
      ['/analytics/timeseries?interval=hour&from=2026-01-01&to=2026-03-01', 400, 'BAD_REQUEST'],
      ['/analytics/campaign-stats', 422, 'VALIDATION_ERROR'],
      ['/analytics/campaign-stats?campaignId=0190a0a0-0000-7000-8000-000000000000', 404, 'CAMPAIGN_NOT_FOUND'],
      ['/analytics/campaign-stats?campaignId=nope', 404, 'CAMPAIGN_NOT_FOUND'],
      [`/analytics/campaign-stats?campaignId=${foreign.body.data.id}`, 404, 'CAMPAIGN_NOT_FOUND'],
    ];
    for (const [path, status, code] of cases) {
      const res = await b.sk.get(path);
      assert.equal(res.status, status, `${path}: ${res.text}`);
      assert.equal(res.body.error.code, code, path);
    }
  });
});
