import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * GET /analytics/top-events reads rollups (whole UTC days) plus the events (partial days) and each
 * contact's first/last event of a name. These cases compare it with the plain count over the events
 * table for ranges that cut days, straddle a contact's events, and after deleting contacts and names.
 */

let server: TestServer;
let b: Bootstrapped;
let fixed: Date | null = null;
const clock = { now: () => fixed ?? new Date() };
const DAY = 86_400_000;
const base = Date.UTC(2026, 0, 10, 0, 0, 0); // midnight UTC
const at = (days: number, hours = 0) => new Date(base + days * DAY + hours * 3_600_000);

async function track(email: string, event: string, when: Date): Promise<void> {
  fixed = when;
  const res = await b.sk.post('/events/track', { email, event });
  fixed = null;
  assert.equal(res.status, 200, res.text);
}

/** What top-events answered before the rollups: the events table, counted directly. */
async function direct(from: string, toCond: string, to: string) {
  const rows = await server.sql<{ name: string; count: number; unique_contacts: number }>(
    `SELECT e.name, count(*)::int AS count, count(DISTINCT e.contact_id)::int AS unique_contacts
       FROM events AS e
      WHERE e.project_id = $1 AND e.created_at >= $2::timestamptz AND e.created_at ${toCond} $3::timestamptz
        AND NOT (e.name LIKE 'email.%' OR e.name IN ('contact.subscribed', 'contact.unsubscribed') OR e.name LIKE 'segment.%.entry' OR e.name LIKE 'segment.%.exit')
      GROUP BY e.name ORDER BY count DESC, e.name LIMIT 50`,
    [b.project.id, from, to],
  );
  return rows.map((r) => ({ name: r.name, count: r.count, uniqueContacts: r.unique_contacts }));
}

async function agrees(from: Date | string, to: Date | string): Promise<void> {
  const f = typeof from === 'string' ? from : from.toISOString();
  const t = typeof to === 'string' ? to : to.toISOString();
  const res = await b.sk.get(`/analytics/top-events?limit=50&from=${encodeURIComponent(f)}&to=${encodeURIComponent(t)}`);
  assert.equal(res.status, 200, res.text);
  const dayTo = /^\d{4}-\d{2}-\d{2}$/.test(t);
  const expected = dayTo ? await direct(f, '<', new Date(Date.parse(`${t}T00:00:00Z`) + DAY).toISOString()) : await direct(f, '<=', t);
  assert.deepEqual(res.body.data, expected, `range ${f} .. ${t}`);
}

const RANGES: [Date | string, Date | string][] = [
  [at(0), at(10)],
  [at(0, 5), at(9, 7)],
  [at(1), at(2)],
  [at(1, 12), at(1, 13)],
  [at(2), at(2)],
  [at(3, 1), at(6, 23)], // inside the straddling contact's gap: no events of theirs
  [at(-5), at(30)],
  ['2026-01-11', '2026-01-13'],
  ['2026-01-12', '2026-01-12'],
];

before(async () => {
  server = await startTestServer({}, { clock });
  b = await bootstrap(server.api, 'Rollups');
  await track('a@ro.test', 'signup', at(0, 10));
  await track('a@ro.test', 'signup', at(1, 12.5));
  await track('a@ro.test', 'signup', at(4, 2)); // a: day 0, day 1 and day 4 (straddles day 1, with an event in it)
  await track('b@ro.test', 'signup', at(1, 23));
  await track('b@ro.test', 'purchase', at(2)); // exactly midnight
  await track('c@ro.test', 'purchase', at(2, 6));
  await track('c@ro.test', 'purchase', at(8, 6)); // c: purchase on day 2 and day 8, nothing between
  await track('d@ro.test', 'signup', at(9, 7));
  await track('d@ro.test', 'viewed', at(5, 3));
});
after(async () => server?.stop());

describe('top-events from the rollups', () => {
  test('equals the direct count for ranges that cut days, cover whole days, or fall between a contact’s events', async () => {
    for (const [f, t] of RANGES) await agrees(f, t);
    const wide = await b.sk.get(`/analytics/top-events?limit=10&from=${at(0).toISOString()}&to=${at(10).toISOString()}`);
    assert.deepEqual(wide.body.data, [
      { name: 'signup', count: 5, uniqueContacts: 3 },
      { name: 'purchase', count: 3, uniqueContacts: 2 },
      { name: 'viewed', count: 1, uniqueContacts: 1 },
    ]);
    const between = await b.sk.get(`/analytics/top-events?limit=10&from=${at(3).toISOString()}&to=${at(8).toISOString()}`);
    assert.deepEqual(between.body.data, [
      { name: 'signup', count: 1, uniqueContacts: 1 },
      { name: 'viewed', count: 1, uniqueContacts: 1 },
    ]);
  });

  test('a deleted contact’s events leave the counts; a deleted event name leaves the list', async () => {
    const contacts = await b.sk.get('/contacts?limit=100');
    const c = contacts.body.data.find((x: { email: string }) => x.email === 'c@ro.test');
    assert.equal((await b.sk.delete(`/contacts/${c.id}`)).status, 204);
    for (const [f, t] of RANGES) await agrees(f, t);
    const wide = await b.sk.get(`/analytics/top-events?limit=10&from=${at(0).toISOString()}&to=${at(10).toISOString()}`);
    assert.deepEqual(wide.body.data, [
      { name: 'signup', count: 5, uniqueContacts: 3 },
      { name: 'purchase', count: 1, uniqueContacts: 1 },
      { name: 'viewed', count: 1, uniqueContacts: 1 },
    ]);
    assert.equal((await b.sk.delete('/events/viewed')).status, 204);
    for (const [f, t] of RANGES) await agrees(f, t);
    const after = await b.sk.get(`/analytics/top-events?limit=10&from=${at(0).toISOString()}&to=${at(10).toISOString()}`);
    assert.deepEqual(
      after.body.data.map((x: { name: string }) => x.name),
      ['signup', 'purchase'],
    );
    const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM event_name_contacts WHERE project_id = $1 AND name = $2', [
      b.project.id,
      'viewed',
    ]);
    assert.equal(n, 0);
  });
});

describe('timeseries from the email-outcome summary', () => {
  let o: Bootstrapped;
  const sendAt = (i: number) => new Date(base + 2 * DAY + i * 37 * 60_000 + i * 1_013); // every 37 minutes and a second
  const tracking = (raw: string, kind: 'o' | 'c') => new URL(new RegExp(`(https?://[^"\\s]+/t/${kind}/[^"\\s]+)"`).exec(raw)![1]).pathname;

  let campaignId: string;
  const campaignAt = new Date(sendAt(1).getTime() + 3 * 60_000 + 5_000);

  /** What timeseries answered before the summaries: every outcome counted from the emails (of one campaign), zero-filled, per bucket. */
  async function direct(from: string, to: string, toOp: '<' | '<=', interval: string, tz: string, campaign?: string) {
    const col = (c: string, extra = '') =>
      `SELECT to_char(date_trunc($3, ${c} AT TIME ZONE $4), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS b, count(*)::int AS n FROM emails WHERE project_id = $5 AND ${c} >= $1::timestamptz AND ${c} ${toOp} $2::timestamptz ${extra} ${campaign ? 'AND campaign_id = $6' : ''} GROUP BY 1`;
    const series = async (sqlText: string) =>
      new Map(
        (await server.sql<{ b: string; n: number }>(sqlText, [from, to, interval, tz, o.project.id, ...(campaign ? [campaign] : [])])).map((r) => [
          Date.parse(r.b),
          r.n,
        ]),
      );
    const parts = {
      sent: [await series(col('sent_at')), await series(col('bounced_at', 'AND sent_at IS NULL'))],
      delivered: [await series(col('delivered_at'))],
      opened: [await series(col('opened_at'))],
      clicked: [await series(col('clicked_at'))],
      bounced: [await series(col('bounced_at'))],
      complained: [await series(col('complained_at'))],
    };
    const totals: Record<string, number> = {};
    const byBucket = new Map<number, Record<string, number>>();
    for (const [metric, maps] of Object.entries(parts)) {
      totals[metric] = 0;
      for (const m of maps)
        for (const [b, n] of m) {
          totals[metric] += n;
          const point = byBucket.get(b) ?? {};
          point[metric] = (point[metric] ?? 0) + n;
          byBucket.set(b, point);
        }
    }
    return { totals, byBucket };
  }

  before(async () => {
    o = await bootstrap(server.api, 'Outcomes');
    for (let i = 0; i < 8; i++) {
      fixed = sendAt(i); // delivery reads the clock: held until the email is delivered
      const sent = await o.sk.post('/v1/send', {
        to: `r${i}@outcomes.test`,
        from: 'hi@sandbox.herald.test',
        subject: 'Hi',
        body: '<p>Hi <a href="https://example.com/x">x</a></p>',
      });
      assert.equal(sent.status, 200, sent.text);
      const id = sent.body.data.emails[0].email;
      await waitFor('delivery', async () => (await o.sk.get(`/emails/${id}`)).body.status === 'DELIVERED', 20_000);
      const raw = String((await simpleParser((await o.sk.get(`/emails/${id}/raw`)).text)).html);
      if (i % 2 === 0) {
        fixed = new Date(sendAt(i).getTime() + 20 * 60_000);
        assert.equal((await server.api.get(tracking(raw, 'o'))).status, 200);
        assert.equal((await server.api.get(tracking(raw, 'o'))).status, 200); // a second open counts once
      }
      if (i % 3 === 0) {
        fixed = new Date(sendAt(i).getTime() + 50 * 60_000);
        assert.equal((await server.api.get(tracking(raw, 'c'))).status, 302); // a first click is an open too when none was seen
      }
      fixed = null;
    }
    // A campaign to three contacts, sent between the emails above, opened and clicked over the next hours.
    fixed = new Date(campaignAt.getTime() - 60_000); // contacts created after a campaign starts are not its recipients
    for (const email of ['c1@outcomes.test', 'c2@outcomes.test', 'c3@outcomes.test']) assert.equal((await o.sk.post('/contacts', { email })).status, 201);
    const created = await o.sk.post('/campaigns', {
      name: 'Slots',
      subject: 'Slots',
      body: '<p>Hi <a href="https://example.com/y">y</a></p>',
      from: 'hi@sandbox.herald.test',
    });
    assert.equal(created.status, 201, created.text);
    campaignId = created.body.data.id;
    fixed = campaignAt;
    assert.equal((await o.sk.post(`/campaigns/${campaignId}/send`, {})).status, 200);
    await waitFor('the campaign', async () => (await o.sk.get(`/campaigns/${campaignId}`)).body.status === 'SENT', 20_000);
    const emails = (await o.sk.get(`/emails?campaignId=${campaignId}`)).body.data as { id: string }[];
    assert.equal(emails.length, 3);
    for (const [i, e] of emails.entries()) {
      const raw = String((await simpleParser((await o.sk.get(`/emails/${e.id}/raw`)).text)).html);
      fixed = new Date(campaignAt.getTime() + (16 + i * 47) * 60_000);
      assert.equal((await server.api.get(tracking(raw, 'o'))).status, 200);
      if (i > 0) {
        fixed = new Date(campaignAt.getTime() + (3 * 60 + i) * 60_000 + 7_000);
        assert.equal((await server.api.get(tracking(raw, 'c'))).status, 302);
      }
    }
    fixed = null;
  });

  /** A series' points against direct()'s buckets (keyed by their local wall time read as UTC). */
  function sameBuckets(points: Record<string, number | string>[], byBucket: Map<number, Record<string, number>>, tz: string, what: string) {
    for (const p of points) {
      const local = Date.parse(String(p.t)); // the bucket's start as an instant
      const key = Date.parse(new Date(local).toLocaleString('sv-SE', { timeZone: tz }).replace(' ', 'T') + 'Z');
      const want = byBucket.get(key) ?? {};
      for (const m of ['sent', 'delivered', 'opened', 'clicked']) assert.equal(p[m], want[m] ?? 0, `${what} bucket ${p.t} ${m}`);
    }
  }

  test('equal the direct count from the emails for ranges that cut quarter hours, in zones a quarter or half hour off UTC; a campaign’s too', async () => {
    const t0 = sendAt(0).getTime();
    const ranges: [string, string][] = [
      [new Date(t0 - DAY).toISOString(), new Date(t0 + DAY).toISOString()],
      [new Date(t0 + 5 * 60_000).toISOString(), new Date(t0 + 3 * 3_600_000 + 7_000).toISOString()],
      [new Date(t0 - (t0 % (15 * 60_000))).toISOString(), new Date(t0 + 4 * 3_600_000 - (t0 % (15 * 60_000))).toISOString()],
      [new Date(t0 + 40 * 60_000).toISOString(), new Date(t0 + 41 * 60_000).toISOString()],
      [sendAt(3).toISOString(), sendAt(6).toISOString()],
      ['2026-01-12', '2026-01-12'],
    ];
    for (const tz of ['UTC', 'Asia/Kathmandu', 'America/St_Johns']) {
      assert.equal((await server.api.patch(`/users/@me/projects/${o.project.id}`, { timezone: tz }, { cookie: o.cookie })).status, 200);
      for (const interval of ['hour', 'day']) {
        for (const [f, t] of ranges) {
          const res = await o.sk.get(`/analytics/timeseries?interval=${interval}&from=${encodeURIComponent(f)}&to=${encodeURIComponent(t)}`);
          assert.equal(res.status, 200, res.text);
          const dayTo = /^\d{4}-\d{2}-\d{2}$/.test(t);
          const directOf = (campaign?: string) =>
            dayTo
              ? direct(`${f}T00:00:00Z`, new Date(Date.parse(`${t}T00:00:00Z`) + DAY).toISOString(), '<', interval, tz, campaign)
              : direct(f, t, '<=', interval, tz, campaign);
          const expected = await directOf();
          const { unsubscribed: _, ...totals } = res.body.totals;
          assert.deepEqual(totals, expected.totals, `${tz} ${interval} ${f} .. ${t}`);
          sameBuckets(res.body.points, expected.byBucket, tz, `${tz} ${interval} ${f} .. ${t}`);
          // The campaign's series: its own slots, and its emails for the partial ones.
          const one = await o.sk.get(
            `/analytics/campaign-stats?campaignId=${campaignId}&interval=${interval}&from=${encodeURIComponent(f)}&to=${encodeURIComponent(t)}`,
          );
          assert.equal(one.status, 200, one.text);
          const ofCampaign = await directOf(campaignId);
          const { unsubscribed: __, ...campaignTotals } = one.body.series.totals;
          assert.deepEqual(campaignTotals, ofCampaign.totals, `campaign ${tz} ${interval} ${f} .. ${t}`);
          sameBuckets(one.body.series.points, ofCampaign.byBucket, tz, `campaign ${tz} ${interval} ${f} .. ${t}`);
        }
      }
    }
    const whole = await o.sk.get(
      `/analytics/campaign-stats?campaignId=${campaignId}&interval=day&from=${encodeURIComponent(new Date(t0 - DAY).toISOString())}&to=${encodeURIComponent(new Date(t0 + DAY).toISOString())}`,
    );
    assert.deepEqual(whole.body.series.totals, { sent: 3, delivered: 3, opened: 3, clicked: 2, bounced: 0, complained: 0, unsubscribed: 0 });
    const wide = await o.sk.get(
      `/analytics/timeseries?interval=day&from=${encodeURIComponent(new Date(t0 - DAY).toISOString())}&to=${encodeURIComponent(new Date(t0 + DAY).toISOString())}`,
    );
    assert.deepEqual(wide.body.totals, { sent: 11, delivered: 11, opened: 8, clicked: 5, bounced: 0, complained: 0, unsubscribed: 0 });
  });
});

describe('hourly buckets across DST changes', () => {
  let d: Bootstrapped;
  const HOUR = 3_600_000;
  // Europe/Berlin: clocks go forward at 2026-03-29T01:00Z (02:00 CET → 03:00 CEST) and back at
  // 2026-10-25T01:00Z (03:00 CEST → 02:00 CET).
  const SPRING = ['2026-03-28T23:20:00Z', '2026-03-29T00:40:00Z', '2026-03-29T01:10:00Z', '2026-03-29T01:50:00Z', '2026-03-29T03:05:00Z'];
  const AUTUMN = ['2026-10-25T00:15:00Z', '2026-10-25T00:45:00Z', '2026-10-25T01:30:00Z', '2026-10-25T02:05:00Z'];
  // One unsubscribe an hour apart in each case: 00:30Z (local 01:30 CET) and 01:30Z (03:30 CEST); 00:30Z (02:30 CEST) and 01:20Z (02:20 CET).
  const UNSUBSCRIBES = ['2026-03-29T00:30:00Z', '2026-03-29T01:30:00Z', '2026-10-25T00:30:00Z', '2026-10-25T01:20:00Z'];

  before(async () => {
    d = await bootstrap(server.api, 'DST');
    assert.equal((await server.api.patch(`/users/@me/projects/${d.project.id}`, { timezone: 'Europe/Berlin' }, { cookie: d.cookie })).status, 200);
    for (const [i, at] of [...SPRING, ...AUTUMN].entries()) {
      fixed = new Date(at); // delivery reads the clock: held until the email is delivered
      const sent = await d.sk.post('/v1/send', { to: `r${i}@dst.test`, from: 'hi@sandbox.herald.test', subject: 'Hi', body: '<p>Hi</p>' });
      assert.equal(sent.status, 200, sent.text);
      const id = sent.body.data.emails[0].email;
      await waitFor('delivery', async () => (await d.sk.get(`/emails/${id}`)).body.status === 'DELIVERED', 20_000);
      fixed = null;
    }
    for (const [i, at] of UNSUBSCRIBES.entries()) {
      const created = await d.sk.post('/contacts', { email: `u${i}@dst.test`, subscribed: true });
      assert.equal(created.status, 201, created.text);
      fixed = new Date(at);
      assert.equal((await d.sk.patch(`/contacts/${created.body.id}`, { subscribed: false })).status, 200);
      fixed = null;
    }
  });

  const hourly = async (from: string, to: string) => {
    const res = await d.sk.get(`/analytics/timeseries?interval=hour&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.timezone, 'Europe/Berlin');
    return res.body.points.map((p: Record<string, number | string>) => [p.t, p.sent, p.delivered, p.unsubscribed]);
  };
  const hours = (from: string, n: number) => Array.from({ length: n }, (_, i) => new Date(Date.parse(from) + i * HOUR).toISOString().replace('.000Z', 'Z'));

  test('when the clocks go forward, each absolute hour is one bucket, once, with its own counts', async () => {
    const t = hours('2026-03-28T22:00:00Z', 7);
    const want = [
      [t[0], 0, 0, 0],
      [t[1], 1, 1, 0], // 23:20Z
      [t[2], 1, 1, 1], // 00:40Z (01:40 CET), unsubscribe 00:30Z
      [t[3], 2, 2, 1], // 01:10Z and 01:50Z (03:10 and 03:50 CEST), unsubscribe 01:30Z
      [t[4], 0, 0, 0],
      [t[5], 1, 1, 0], // 03:05Z
      [t[6], 0, 0, 0],
    ];
    // Whole quarter hours (the outcome summary), and a range that cuts them (the emails).
    assert.deepEqual(await hourly('2026-03-28T22:00:00Z', '2026-03-29T04:00:00Z'), want);
    assert.deepEqual(await hourly('2026-03-28T22:07:00Z', '2026-03-29T03:59:00Z'), want.slice(0, 6));
  });

  test('when the clocks go back, the two hours of the same local wall time are two buckets', async () => {
    const t = hours('2026-10-24T22:00:00Z', 7);
    const want = [
      [t[0], 0, 0, 0],
      [t[1], 0, 0, 0],
      [t[2], 2, 2, 1], // 00:15Z and 00:45Z (02:15, 02:45 CEST), unsubscribe 00:30Z
      [t[3], 1, 1, 1], // 01:30Z (02:30 CET), unsubscribe 01:20Z
      [t[4], 1, 1, 0], // 02:05Z
      [t[5], 0, 0, 0],
      [t[6], 0, 0, 0],
    ];
    assert.deepEqual(await hourly('2026-10-24T22:00:00Z', '2026-10-25T04:00:00Z'), want);
    assert.deepEqual(await hourly('2026-10-24T22:07:00Z', '2026-10-25T03:59:00Z'), want.slice(0, 6));
  });

  test('days stay local calendar days: 29 March is 23 hours long', async () => {
    const res = await d.sk.get('/analytics/timeseries?interval=day&from=2026-03-28T12:00:00Z&to=2026-03-30T00:00:00Z');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.points.map((p: Record<string, number | string>) => [p.t, p.sent, p.unsubscribed]),
      [
        ['2026-03-27T23:00:00Z', 0, 0],
        ['2026-03-28T23:00:00Z', 5, 2], // 23:20Z is 00:20 on the 29th in Berlin
        ['2026-03-29T22:00:00Z', 0, 0],
      ],
    );
  });
});
