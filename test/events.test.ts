import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { usage as usageOf } from '../src/modules/usage/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
let fixed: Date | null = null;
const clock = { now: () => fixed ?? new Date() };

before(async () => {
  server = await startTestServer({}, { clock });
});
after(async () => server?.stop());

type EventItem = { id: string; name: string; contactId: string | null; contactEmail: string | null; data: Record<string, unknown>; createdAt: string };

/** Tracks with the server clock set to `at`. */
async function trackAt(api: Api, at: string, body: Record<string, unknown>) {
  fixed = new Date(at);
  try {
    const res = await api.post('/v1/track', body);
    assert.equal(res.status, 200, res.text);
    return res.body.data as { contact: string; event: string; timestamp: string };
  } finally {
    fixed = null;
  }
}

/** Every page of a cursor list. */
async function walk(api: Api, path: string): Promise<{ items: EventItem[]; pages: { total: number; hasMore: boolean; cursor?: string }[] }> {
  const items: EventItem[] = [];
  const pages = [];
  let cursor: string | undefined;
  for (let i = 0; i < 50; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const res = await api.get(cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
    assert.equal(res.status, 200, res.text);
    items.push(...res.body.data);
    pages.push({ total: res.body.total, hasMore: res.body.hasMore, cursor: res.body.cursor });
    if (!res.body.hasMore) return { items, pages };
    cursor = res.body.cursor;
  }
  throw new Error('too many pages');
}

describe('POST /events/track (dashboard alias)', () => {
  test('works with the secret key and with a session cookie, answering like /v1/track', async () => {
    const b = await bootstrap(server.api);
    const bySecret = await b.sk.post('/events/track', { email: 'alias@example.com', event: 'demo', data: { plan: 'pro' } });
    assert.equal(bySecret.status, 200, bySecret.text);
    assert.equal(bySecret.body.success, true);
    assert.match(bySecret.body.data.event, /^evt_/);
    const cookie = { cookie: b.cookie, headers: { 'x-project-id': b.project.id } };
    const byCookie = await server.api.post('/events/track', { email: 'alias@example.com', event: 'demo' }, cookie);
    assert.equal(byCookie.status, 200, byCookie.text);
    assert.equal(byCookie.body.data.contact, bySecret.body.data.contact);
    const listed = await b.sk.get('/events?name=demo');
    assert.equal(listed.body.total, 2);
    const noProject = await server.api.post('/events/track', { email: 'alias@example.com', event: 'demo' }, { cookie: b.cookie });
    assert.equal(noProject.status, 400);
  });
});

describe('GET /events', () => {
  let b: Bootstrapped;
  const made: { id: string; at: string; email: string; name: string }[] = [];

  before(async () => {
    b = await bootstrap(server.api);
    // 25 events over three contacts; events 10..14 share one timestamp, so ties are broken by id.
    for (let i = 0; i < 25; i++) {
      const at = new Date(Date.UTC(2024, 0, 1, 0, 0, i >= 10 && i < 15 ? 10 : i)).toISOString();
      const email = `c${i % 3}@example.com`;
      const name = i % 2 === 0 ? 'page_view' : 'signup';
      const r = await trackAt(b.pk, at, { email, event: name, data: { i } });
      made.push({ id: r.event, at, email, name });
    }
  });

  test('newest first in pages of `limit`, no row twice or missed; total on the first page only', async () => {
    const { items, pages } = await walk(b.sk, '/events?limit=10');
    assert.deepEqual(
      pages.map((p) => [p.total, p.hasMore, typeof p.cursor]),
      [
        [25, true, 'string'],
        [0, true, 'string'],
        [0, false, 'undefined'],
      ],
    );
    const expected = [...made].sort((x, y) => (x.at === y.at ? (x.id < y.id ? 1 : -1) : x.at < y.at ? 1 : -1));
    assert.deepEqual(
      items.map((e) => e.id),
      expected.map((e) => e.id),
    );
    const first = items[0];
    const source = made.find((m) => m.id === first.id)!;
    assert.deepEqual(first, {
      id: source.id,
      name: source.name,
      contactId: first.contactId,
      contactEmail: source.email,
      data: { i: 24 },
      createdAt: source.at,
    });
    assert.match(first.contactId!, /^cnt_/);
  });

  test('filters by name and by contactId, together or apart', async () => {
    const signups = await walk(b.sk, '/events?name=signup&limit=5');
    assert.equal(signups.items.length, 12);
    assert.ok(signups.items.every((e) => e.name === 'signup'));
    assert.equal(signups.pages[0].total, 12);

    const contactId = signups.items.find((e) => e.contactEmail === 'c1@example.com')!.contactId!;
    const mine = await walk(b.sk, `/events?contactId=${contactId}`);
    assert.deepEqual(
      mine.items.map((e) => e.id),
      made
        .filter((m) => m.email === 'c1@example.com')
        .sort((x, y) => (x.at === y.at ? (x.id < y.id ? 1 : -1) : x.at < y.at ? 1 : -1))
        .map((m) => m.id),
    );
    const both = await b.sk.get(`/events?contactId=${contactId}&name=signup`);
    assert.ok(both.body.data.length > 0);
    assert.ok(both.body.data.every((e: EventItem) => e.name === 'signup' && e.contactId === contactId));
    const unknown = await b.sk.get('/events?contactId=cnt_nope');
    assert.deepEqual([unknown.status, unknown.body.data, unknown.body.total], [200, [], 0]);
  });

  test('another project sees none of these events', async () => {
    const other = await bootstrap(server.api);
    const res = await other.sk.get('/events');
    assert.deepEqual([res.body.data, res.body.total, res.body.hasMore], [[], 0, false]);
  });

  test('limit is clamped to 100; a malformed cursor is 400; limit 0 is 422', async () => {
    const big = await b.sk.get('/events?limit=1000');
    assert.equal(big.status, 200);
    assert.equal(big.body.data.length, 25);
    const bad = await b.sk.get('/events?cursor=garbage');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'BAD_REQUEST');
    const forged = await b.sk.get(`/events?cursor=${Buffer.from(JSON.stringify(["2024-01-01'; --", 'evt_x'])).toString('base64url')}`);
    assert.equal(forged.status, 400);
    const zero = await b.sk.get('/events?limit=0');
    assert.equal(zero.status, 422);
  });

  test('GET /events/contact/:contactId lists one contact, subscription events included; 404 for unknown or foreign', async () => {
    const t = await bootstrap(server.api);
    const created = await t.sk.post('/contacts', { email: 'timeline@example.com' });
    await trackAt(t.pk, '2024-02-01T00:00:00.000Z', { email: 'timeline@example.com', event: 'visit' });
    await trackAt(t.pk, '2024-02-02T00:00:00.000Z', { email: 'timeline@example.com', event: 'leave', subscribed: false });
    await trackAt(t.pk, '2024-02-03T00:00:00.000Z', { email: 'someone@example.com', event: 'visit' });
    const res = await t.sk.get(`/events/contact/${created.body.id}`);
    assert.equal(res.status, 200, res.text);
    // 'leave' and its contact.unsubscribed share one instant: ordered by id, newest id first.
    const [a, b2] = res.body.data as EventItem[];
    assert.ok(a.id > b2.id);
    assert.deepEqual(
      res.body.data.map((e: EventItem) => [e.name, e.createdAt, e.contactEmail]),
      [
        [a.name, '2024-02-02T00:00:00.000Z', 'timeline@example.com'],
        [b2.name, '2024-02-02T00:00:00.000Z', 'timeline@example.com'],
        ['visit', '2024-02-01T00:00:00.000Z', 'timeline@example.com'],
      ],
    );
    assert.deepEqual([a.name, b2.name].sort(), ['contact.unsubscribed', 'leave']);
    assert.equal(res.body.total, 3);
    const filtered = await t.sk.get(`/events/contact/${created.body.id}?name=visit`);
    assert.equal(filtered.body.total, 1);

    for (const id of ['cnt_00000000000000000000000000000000', 'nope']) {
      const missing = await t.sk.get(`/events/contact/${id}`);
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'CONTACT_NOT_FOUND');
    }
    const foreign = await b.sk.get(`/events/contact/${created.body.id}`);
    assert.equal(foreign.status, 404);
  });
});

describe('GET /events/names and /events/stats', () => {
  let b: Bootstrapped;

  before(async () => {
    b = await bootstrap(server.api);
    await b.sk.post('/contacts', { email: 'n1@example.com' });
    await trackAt(b.pk, '2024-03-01T10:00:00.000Z', { email: 'n1@example.com', event: 'signup' });
    await trackAt(b.pk, '2024-03-02T10:00:00.000Z', { email: 'n2@example.com', event: 'signup' });
    await trackAt(b.pk, '2024-03-03T10:00:00.000Z', { email: 'n1@example.com', event: 'purchase' });
    await trackAt(b.pk, '2024-03-04T10:00:00.000Z', { email: 'n1@example.com', event: 'purchase' });
    await trackAt(b.pk, '2024-03-05T10:00:00.000Z', { email: 'n1@example.com', event: 'churn', subscribed: false });
  });

  test('names: each distinct name once, sorted, with its last occurrence and whether the service emits it', async () => {
    const res = await b.sk.get('/events/names');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      names: [
        { name: 'churn', reserved: false, lastSeenAt: '2024-03-05T10:00:00.000Z' },
        { name: 'contact.unsubscribed', reserved: true, lastSeenAt: '2024-03-05T10:00:00.000Z' },
        { name: 'purchase', reserved: false, lastSeenAt: '2024-03-04T10:00:00.000Z' },
        { name: 'signup', reserved: false, lastSeenAt: '2024-03-02T10:00:00.000Z' },
      ],
    });
    const empty = await (await bootstrap(server.api)).sk.get('/events/names');
    assert.deepEqual(empty.body, { names: [] });
  });

  test('stats: counts and distinct contacts per name over from/to, both inclusive', async () => {
    const res = await b.sk.get('/events/stats?from=2024-03-02T00:00:00Z&to=2024-03-04T10:00:00.000Z');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      from: '2024-03-02T00:00:00.000Z',
      to: '2024-03-04T10:00:00.000Z',
      total: 3,
      events: [
        { name: 'purchase', count: 2, uniqueContacts: 1 },
        { name: 'signup', count: 1, uniqueContacts: 1 },
      ],
    });
  });

  test('stats: uniqueContacts counts each contact once per name, and not events without a contact', async () => {
    const c = await bootstrap(server.api);
    const contact = (await c.pk.post('/v1/track', { email: 'u1@example.com', event: 'signup' })).body.data.contact as string;
    await c.pk.post('/v1/track', { email: 'u2@example.com', event: 'signup' });
    await c.pk.post('/v1/track', { email: 'u1@example.com', event: 'signup' });
    for (const [i, contactId] of [null, null, contact].entries()) {
      await server.sql(`INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES ($1, $2, $3, 'email.opened', now())`, [
        `evt_u${i}`,
        c.project.id,
        contactId,
      ]);
    }
    const res = await c.sk.get('/events/stats');
    assert.deepEqual(res.body.events, [
      { name: 'email.opened', count: 3, uniqueContacts: 1 },
      { name: 'signup', count: 3, uniqueContacts: 2 },
    ]);
    assert.equal(res.body.total, 6);
  });

  test('stats: a day `to` covers that whole day', async () => {
    const res = await b.sk.get('/events/stats?from=2024-03-01&to=2024-03-05');
    assert.equal(res.body.to, '2024-03-05T23:59:59.999Z');
    assert.equal(res.body.total, 6);
    assert.deepEqual(
      res.body.events.map((e: { name: string; count: number }) => [e.name, e.count]),
      [
        ['purchase', 2],
        ['signup', 2],
        ['churn', 1],
        ['contact.unsubscribed', 1],
      ],
    );
  });

  test('stats default to the last 30 days', async () => {
    fixed = new Date('2024-03-20T00:00:00.000Z');
    try {
      const res = await b.sk.get('/events/stats');
      assert.equal(res.body.from, '2024-02-19T00:00:00.000Z');
      assert.equal(res.body.to, '2024-03-20T00:00:00.000Z');
      assert.equal(res.body.total, 6);
    } finally {
      fixed = null;
    }
    const now = await b.sk.get('/events/stats');
    assert.equal(now.body.total, 0, 'events of March 2024 are older than 30 days');
  });

  test('stats: unparseable dates and from after to are 422', async () => {
    for (const q of ['from=yesterday', 'to=2024-13-45', 'from=2024-03-05&to=2024-03-01', 'from=2024-03-01T00:00:00']) {
      const res = await b.sk.get(`/events/stats?${q}`);
      assert.equal(res.status, 422, q);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.equal(res.body.error.errors[0].field, q.startsWith('to') ? 'to' : 'from');
    }
  });
});

describe('usage and deletion', () => {
  test('usage has the final shape before segments and workflows exist', async () => {
    const b = await bootstrap(server.api);
    await trackAt(b.pk, '2024-04-01T00:00:00.000Z', { email: 'u@example.com', event: 'trial started' });
    const res = await b.sk.get(`/events/${encodeURIComponent('trial started')}/usage`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { segments: [], campaigns: [], workflows: [], eventCount: 1, canDelete: true });
    const reserved = await b.sk.get('/events/email.sent/usage');
    assert.deepEqual(reserved.body, { segments: [], campaigns: [], workflows: [], eventCount: 0, canDelete: false });
  });

  test('a name referenced through a usage provider cannot be deleted (409), others can (204)', async () => {
    const b = await bootstrap(server.api);
    const real = usageOf.eventNameUsers;
    const provider = mock.method(usageOf, 'eventNameUsers', async (...args: Parameters<typeof real>) => {
      const [, projectId, eventName] = args;
      return projectId === b.project.id && eventName === 'upgraded'
        ? { segments: [{ id: 'seg-1', name: 'Upgraders' }], campaigns: [], workflows: [{ id: 'wf-1', name: 'Upsell' }] }
        : real(...args);
    });
    try {
      await trackAt(b.pk, '2024-04-01T00:00:00.000Z', { email: 'd@example.com', event: 'upgraded' });
      const usage = await b.sk.get('/events/upgraded/usage');
      assert.deepEqual(usage.body, {
        segments: [{ id: 'seg-1', name: 'Upgraders' }],
        campaigns: [],
        workflows: [{ id: 'wf-1', name: 'Upsell' }],
        eventCount: 1,
        canDelete: false,
      });
      const refused = await b.sk.delete('/events/upgraded');
      assert.equal(refused.status, 409);
      assert.equal(refused.body.error.code, 'CONFLICT');
      assert.deepEqual(refused.body.error.details.segments, [{ id: 'seg-1', name: 'Upgraders' }]);
      assert.equal((await b.sk.get('/events?name=upgraded')).body.total, 1);
    } finally {
      provider.mock.restore();
    }
  });

  test('DELETE removes every event of the name in this project only', async () => {
    const b = await bootstrap(server.api);
    const other = await bootstrap(server.api);
    for (const api of [b.pk, b.pk, other.pk]) await trackAt(api, '2024-04-02T00:00:00.000Z', { email: 'x@example.com', event: 'legacy/event v1' });
    await trackAt(b.pk, '2024-04-02T00:00:00.000Z', { email: 'x@example.com', event: 'kept' });
    const res = await b.sk.delete(`/events/${encodeURIComponent('legacy/event v1')}`);
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.equal((await b.sk.get(`/events?name=${encodeURIComponent('legacy/event v1')}`)).body.total, 0);
    assert.equal((await b.sk.get('/events?name=kept')).body.total, 1);
    assert.equal((await other.sk.get('/events')).body.total, 1, "another project's events stay");
    assert.equal((await b.sk.delete('/events/never-tracked')).status, 204);
  });

  test('DELETE /events/email.sent and other emitted names is 400', async () => {
    const b = await bootstrap(server.api);
    for (const name of ['email.sent', 'Email.Opened', 'contact.subscribed', 'contact.unsubscribed', 'segment.vip.entry']) {
      const res = await b.sk.delete(`/events/${name}`);
      assert.equal(res.status, 400, name);
      assert.equal(res.body.error.code, 'BAD_REQUEST');
    }
  });

  test('an event named "contact" has its usage at /events/contact/usage too', async () => {
    const b = await bootstrap(server.api);
    await trackAt(b.pk, '2024-04-03T00:00:00.000Z', { email: 'c@example.com', event: 'contact' });
    const res = await b.sk.get('/events/contact/usage');
    assert.deepEqual(res.body, { segments: [], campaigns: [], workflows: [], eventCount: 1, canDelete: true });
  });

  test('a name over 255 characters in the path is 422', async () => {
    const b = await bootstrap(server.api);
    const res = await b.sk.delete(`/events/${'n'.repeat(256)}`);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.errors[0].field, 'eventName');
  });
});

describe('a project with more than 1,000 event names', () => {
  test('/events/names lists the first 1,000 and says so; /events/stats the 1,000 most frequent, with every event in total', async () => {
    const b = await bootstrap(server.api);
    const [contact] = await server.sql<{ id: string }>(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       VALUES ('cnt_many_names', $1, 'names@example.com', true, '{}', now(), now()) RETURNING id`,
      [b.project.id],
    );
    // 1,200 names, each once, and `popular` three times.
    await server.sql(
      `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT gen_random_uuid(), $1, $2, name, '{}', now()
         FROM (SELECT 'name-' || lpad(g::text, 4, '0') AS name FROM generate_series(1, 1200) AS g UNION ALL SELECT 'popular' FROM generate_series(1, 3)) AS n`,
      [b.project.id, contact.id],
    );
    const names = await b.sk.get('/events/names');
    assert.equal(names.status, 200, names.text);
    assert.equal(names.body.truncated, true);
    assert.equal(names.body.names.length, 1000);
    assert.equal(names.body.names[0].name, 'name-0001');
    assert.equal(names.body.names[999].name, 'name-1000');
    const stats = await b.sk.get('/events/stats');
    assert.equal(stats.status, 200, stats.text);
    assert.equal(stats.body.total, 1203);
    assert.equal(stats.body.events.length, 1000);
    assert.deepEqual(stats.body.events[0], { name: 'popular', count: 3, uniqueContacts: 1 });
  });
});
