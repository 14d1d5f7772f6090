import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { usage as usageOf } from '../src/modules/usage/service.ts';
import { recordEvent } from '../src/modules/events/record.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let dns: TestDns;
let server: TestServer;
let fixed: Date | null = null;
const clock = { now: () => fixed ?? new Date() };

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address }, { clock });
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

type Item = {
  id: string;
  type: string;
  occurredAt: string;
  contact: { id: string; email: string } | null;
  emailId?: string;
  subject?: string;
  eventName?: string;
  data: Record<string, unknown>;
};

async function waitForStatus(sk: Api, id: string, status: string) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await sk.get(`/emails/${id}`);
    if (res.body.status === status) return;
    if (Date.now() > deadline) assert.fail(`email ${id} stayed ${res.body.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Writes an event the way the service's own emitters do (tracking pixel, SNS, segments). */
async function emit(projectId: string, contactId: string | null, name: string, at: string, data: Record<string, unknown> = {}) {
  return recordEvent(server.ctx.database.db, { projectId, contactId, name, data, createdAt: new Date(at) });
}

describe('GET /activity', () => {
  let b: Bootstrapped;
  let ada: string;
  let bob: string;
  let emailId: string;

  before(async () => {
    b = await bootstrap(server.api);
    await verifyDomain(b.sk, dns, 'mail.example.test');
    ada = (await b.pk.post('/v1/track', { email: 'ada@example.org', event: 'signup', data: { plan: 'pro' } })).body.data.contact;
    const sent = await b.sk.post('/v1/send', {
      to: 'ada@example.org',
      from: 'hello@mail.example.test',
      subject: 'Welcome {{plan}}',
      body: '<p>Hi</p>',
    });
    assert.equal(sent.status, 200, sent.text);
    emailId = sent.body.data.emails[0].email;
    await waitForStatus(b.sk, emailId, 'DELIVERED');
    const off = await b.sk.patch(`/contacts/${ada}`, { subscribed: false });
    assert.equal(off.status, 200, off.text);
    bob = (await b.pk.post('/v1/track', { email: 'bob@example.org', event: 'purchase', data: { amount: 42 } })).body.data.contact;
  });

  test('merges tracked events, email activity and subscription changes, newest first, with their details', async () => {
    const res = await b.sk.get('/activity');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.total, 5);
    assert.equal(res.body.hasMore, false);
    const items: Item[] = res.body.data;
    // A captured email is sent and delivered in the same instant: equal times are ordered by id
    // (newest id first), which within one millisecond is not creation order.
    assert.equal(items[2].occurredAt, items[3].occurredAt);
    assert.ok(items[2].id > items[3].id);
    assert.deepEqual(
      items.map((i) => [i.type, i.contact?.email]),
      [
        ['event', 'bob@example.org'],
        ['contact.unsubscribed', 'ada@example.org'],
        [items[2].type, 'ada@example.org'],
        [items[3].type, 'ada@example.org'],
        ['event', 'ada@example.org'],
      ],
    );
    assert.deepEqual([items[2].type, items[3].type].sort(), ['email.delivered', 'email.sent']);
    const [purchase, unsubscribed] = items;
    const delivered = items.find((i) => i.type === 'email.delivered')!;
    const sentItem = items.find((i) => i.type === 'email.sent')!;
    const signup = items[4];
    assert.deepEqual(purchase.contact, { id: bob, email: 'bob@example.org' });
    assert.equal(purchase.eventName, 'purchase');
    assert.deepEqual(purchase.data, { amount: 42 });
    assert.equal(unsubscribed.eventName, undefined);
    assert.equal(unsubscribed.emailId, undefined);
    assert.equal(delivered.emailId, emailId);
    assert.equal(delivered.subject, 'Welcome pro');
    assert.equal(sentItem.emailId, emailId);
    assert.equal(sentItem.subject, 'Welcome pro');
    assert.equal(sentItem.eventName, undefined);
    assert.equal(signup.eventName, 'signup');
    assert.deepEqual(signup.data, { plan: 'pro' });
    for (const i of items) {
      assert.match(i.id, /^evt_/);
      assert.ok(!Number.isNaN(Date.parse(i.occurredAt)));
    }
    const times = items.map((i) => i.occurredAt);
    assert.deepEqual(times, [...times].sort().reverse());
  });

  test('filters by types (comma-separated or repeated) and by contact', async () => {
    const emails = await b.sk.get('/activity?types=email.sent,email.delivered');
    assert.deepEqual(emails.body.data.map((i: Item) => i.type).sort(), ['email.delivered', 'email.sent']);
    assert.equal(emails.body.total, 2);
    const repeated = await b.sk.get('/activity?types=event&types=contact.unsubscribed');
    assert.deepEqual(
      repeated.body.data.map((i: Item) => i.eventName ?? i.type),
      ['purchase', 'contact.unsubscribed', 'signup'],
    );
    const adaOnly = await b.sk.get(`/activity?contactId=${ada}`);
    assert.equal(adaOnly.body.total, 4);
    assert.ok(adaOnly.body.data.every((i: Item) => i.contact?.id === ada));
    const combined = await b.sk.get(`/activity?contactId=${ada}&types=event`);
    assert.deepEqual(
      combined.body.data.map((i: Item) => i.eventName),
      ['signup'],
    );
    const nobody = await b.sk.get('/activity?contactId=cnt_00000000000000000000000000000000');
    assert.deepEqual([nobody.body.data, nobody.body.total], [[], 0]);
  });

  test('pages with a cursor without repeating or skipping items', async () => {
    const seen: string[] = [];
    let path = '/activity?limit=2';
    const totals: number[] = [];
    for (;;) {
      const res = await b.sk.get(path);
      assert.equal(res.status, 200);
      totals.push(res.body.total);
      seen.push(...res.body.data.map((i: Item) => i.id));
      if (!res.body.hasMore) break;
      path = `/activity?limit=2&cursor=${res.body.cursor}`;
    }
    const all = (await b.sk.get('/activity')).body.data.map((i: Item) => i.id);
    assert.deepEqual(seen, all);
    assert.deepEqual(totals, [5, 0, 0]);
  });

  test('an unknown type is 422; a bad cursor 400; bad dates 422', async () => {
    const type = await b.sk.get('/activity?types=email.sent,sends');
    assert.equal(type.status, 422);
    assert.equal(type.body.error.errors[0].field, 'types.1');
    assert.equal(type.body.error.errors[0].code, 'invalid_enum_value');
    assert.equal((await b.sk.get('/activity?cursor=xyz')).status, 400);
    assert.equal((await b.sk.get('/activity?from=soon')).status, 422);
  });
});

describe('activity over time', () => {
  let b: Bootstrapped;
  let contactId: string;

  before(async () => {
    b = await bootstrap(server.api);
    fixed = new Date('2024-06-01T09:00:00.000Z');
    try {
      contactId = (await b.pk.post('/v1/track', { email: 'eve@example.org', event: 'signup' })).body.data.contact;
    } finally {
      fixed = null;
    }
    const p = b.project.id;
    await emit(p, contactId, 'email.sent', '2024-06-01T10:00:00.000Z', { emailId: 'e1', subject: 'S' });
    await emit(p, contactId, 'email.delivered', '2024-06-01T10:00:01.000Z', { emailId: 'e1', subject: 'S' });
    await emit(p, contactId, 'email.opened', '2024-06-01T11:00:00.000Z', { emailId: 'e1', subject: 'S' });
    await emit(p, contactId, 'email.opened', '2024-06-01T11:30:00.000Z', { emailId: 'e1', subject: 'S' });
    await emit(p, contactId, 'email.clicked', '2024-06-01T11:31:00.000Z', { emailId: 'e1', subject: 'S', link: 'https://x.test' });
    await emit(p, contactId, 'email.bounced', '2024-06-02T10:00:00.000Z', { emailId: 'e2', subject: 'T', bounceType: 'Permanent' });
    await emit(p, contactId, 'email.complained', '2024-06-03T10:00:00.000Z', { emailId: 'e3', subject: 'U' });
    await emit(p, contactId, 'segment.vip-customers.entry', '2024-06-04T10:00:00.000Z');
    await emit(p, contactId, 'segment.vip-customers.exit', '2024-06-05T10:00:00.000Z');
  });

  test('from/to bound the feed', async () => {
    const res = await b.sk.get('/activity?from=2024-06-01T11:00:00Z&to=2024-06-02');
    assert.deepEqual(
      res.body.data.map((i: Item) => i.type),
      ['email.bounced', 'email.clicked', 'email.opened', 'email.opened'],
    );
    const clicked = res.body.data[1];
    assert.deepEqual(clicked.data, { emailId: 'e1', subject: 'S', link: 'https://x.test' });
    assert.equal(clicked.emailId, 'e1');
  });

  test('segment entries and exits are their own types and keep the event name', async () => {
    const res = await b.sk.get('/activity?types=segment.entry,segment.exit');
    assert.deepEqual(
      res.body.data.map((i: Item) => [i.type, i.eventName]),
      [
        ['segment.exit', 'segment.vip-customers.exit'],
        ['segment.entry', 'segment.vip-customers.entry'],
      ],
    );
  });

  test('stats count every type over the range (zeros included); default is the last 30 days', async () => {
    const res = await b.sk.get('/activity/stats?from=2024-06-01&to=2024-06-03');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      from: '2024-06-01T00:00:00.000Z',
      to: '2024-06-03T23:59:59.999Z',
      total: 8,
      counts: {
        'email.sent': 1,
        'email.delivered': 1,
        'email.opened': 2,
        'email.clicked': 1,
        'email.bounced': 1,
        'email.complained': 1,
        'email.failed': 0,
        'contact.subscribed': 0,
        'contact.unsubscribed': 0,
        'segment.entry': 0,
        'segment.exit': 0,
        event: 1,
      },
    });
    fixed = new Date('2024-06-20T00:00:00.000Z');
    try {
      const recent = await b.sk.get('/activity/stats');
      assert.equal(recent.body.from, '2024-05-21T00:00:00.000Z');
      assert.equal(recent.body.total, 10);
    } finally {
      fixed = null;
    }
  });

  test('recent-count counts the last `minutes` (default 60)', async () => {
    fixed = new Date('2024-06-01T11:40:00.000Z');
    try {
      const hour = await b.sk.get('/activity/recent-count');
      assert.deepEqual(hour.body, { count: 3, minutes: 60, since: '2024-06-01T10:40:00.000Z' });
      const ten = await b.sk.get('/activity/recent-count?minutes=10');
      assert.equal(ten.body.count, 2, 'since 11:30, inclusive');
    } finally {
      fixed = null;
    }
    for (const q of ['minutes=0', 'minutes=abc', 'minutes=1.5', 'minutes=50000']) {
      const res = await b.sk.get(`/activity/recent-count?${q}`);
      assert.equal(res.status, 422, q);
      assert.equal(res.body.error.errors[0].field, 'minutes');
    }
  });

  test('types lists the types present, in canonical order', async () => {
    const res = await b.sk.get('/activity/types');
    assert.deepEqual(res.body, {
      types: ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained', 'segment.entry', 'segment.exit', 'event'],
    });
    const empty = await (await bootstrap(server.api)).sk.get('/activity/types');
    assert.deepEqual(empty.body, { types: [] });
  });
});

describe('counts over a range (whole days from the day counters, partial days from the events)', () => {
  test('agree with the events listed, at and around midnights, for every kind of range', async () => {
    const b = await bootstrap(server.api);
    const contact = (await b.pk.post('/v1/track', { email: 'mid@example.org', event: 'signup' })).body.data.contact as string;
    const instants = [
      '2024-07-01T00:00:00Z',
      '2024-07-01T23:59:59.999999Z',
      '2024-07-02T00:00:00Z',
      '2024-07-02T00:00:00.000400Z',
      '2024-07-02T12:00:00Z',
      '2024-07-03T00:00:00Z',
      '2024-07-04T18:30:00.250Z',
      '2024-07-06T00:00:00Z',
    ];
    for (const [i, at] of instants.entries()) {
      const name = i % 3 === 0 ? 'email.opened' : i % 3 === 1 ? 'purchase' : 'segment.vip.entry';
      await server.sql(`INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES ($1, $2, $3, $4, $5)`, [
        `evt_mid${i}`,
        b.project.id,
        contact,
        name,
        at,
      ]);
    }
    const ends = [
      '2024-07-01',
      '2024-07-02',
      '2024-07-01T00:00:00Z',
      '2024-07-01T23:59:59.999Z',
      '2024-07-02T00:00:00Z',
      '2024-07-02T06:00:00Z',
      '2024-07-03T00:00:00Z',
      '2024-07-03',
      '2024-07-06T00:00:00Z',
      '2024-07-05',
    ];
    let compared = 0;
    for (const from of ends) {
      for (const to of ends) {
        if (Date.parse(from) > Date.parse(to.length === 10 ? `${to}T23:59:59.999Z` : to)) continue;
        const range = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
        const listed = await b.sk.get(`/activity?limit=100&${range}`);
        const stats = await b.sk.get(`/activity/stats?${range}`);
        const events = await b.sk.get(`/activity?limit=100&types=event&${range}`);
        assert.equal(listed.status, 200, listed.text);
        const n = listed.body.data.length;
        assert.deepEqual([listed.body.total, stats.body.total], [n, n], range);
        const byType = (t: string) => listed.body.data.filter((i: Item) => i.type === t).length;
        assert.deepEqual(
          [stats.body.counts['email.opened'], stats.body.counts.event, stats.body.counts['segment.entry']],
          [byType('email.opened'), byType('event'), byType('segment.entry')],
          range,
        );
        assert.deepEqual([events.body.total, events.body.data.length], [byType('event'), byType('event')], range);
        compared++;
      }
    }
    assert.ok(compared > 40, `${compared} ranges`);
    // Open ends: only one bound given.
    assert.equal((await b.sk.get('/activity?from=2024-07-02')).body.total, 7, 'six, and the signup tracked today');
    assert.equal((await b.sk.get('/activity?to=2024-07-01T23:59:59.999Z')).body.total, 1);
    fixed = new Date('2024-07-06T00:00:00Z');
    try {
      assert.equal((await b.sk.get('/activity/recent-count?minutes=43200')).body.count, 8);
      assert.equal((await b.sk.get('/activity/recent-count?minutes=5760')).body.count, 6, 'since 2024-07-02T00:00Z, both ends included');
    } finally {
      fixed = null;
    }
  });
});

describe('GET /activity/upcoming', () => {
  test('is an empty list until campaigns and workflows register, then soonest first, limited', async () => {
    const b = await bootstrap(server.api);
    assert.deepEqual((await b.sk.get('/activity/upcoming')).body, { data: [] });
    const campaigns = async (_db: unknown, projectId: string) =>
      projectId === b.project.id
        ? [
            { type: 'campaign' as const, id: 'c2', name: 'June newsletter', scheduledFor: '2030-06-02T00:00:00.000Z' },
            { type: 'campaign' as const, id: 'c1', name: 'Launch', scheduledFor: '2030-06-01T00:00:00.000Z' },
          ]
        : [];
    const workflows = async (_db: unknown, projectId: string) =>
      projectId === b.project.id ? [{ type: 'workflow' as const, id: 'x1', name: 'Onboarding', scheduledFor: '2030-06-01T12:00:00.000Z', contact: null }] : [];
    const real = usageOf.upcoming;
    const providers = mock.method(usageOf, 'upcoming', async (...args: Parameters<typeof real>) => [
      ...(await real(...args)),
      ...(await campaigns(args[0], args[1])),
      ...(await workflows(args[0], args[1])),
    ]);
    try {
      const res = await b.sk.get('/activity/upcoming');
      assert.deepEqual(
        res.body.data.map((i: { id: string }) => i.id),
        ['c1', 'x1', 'c2'],
      );
      const limited = await b.sk.get('/activity/upcoming?limit=1');
      assert.deepEqual(limited.body.data, [{ type: 'campaign', id: 'c1', name: 'Launch', scheduledFor: '2030-06-01T00:00:00.000Z' }]);
    } finally {
      providers.mock.restore();
    }
  });

  test('needs a secret key or a member session', async () => {
    const b = await bootstrap(server.api);
    assert.equal((await b.pk.get('/activity/upcoming')).status, 401);
    assert.equal((await server.api.get('/activity/upcoming')).status, 401);
    const cookie = await server.api.get('/activity/upcoming', { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
    assert.equal(cookie.status, 200);
  });
});
