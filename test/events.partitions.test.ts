import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clearExpiredEmailContents } from '../src/modules/emails/retention.ts';
import { ANALYZE_AFTER_CHANGES, maintainEventPartitions } from '../src/modules/events/partitions.ts';
import { storageMaintenanceQueue } from '../src/modules/retention/jobs.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { waitForStatus } from './helpers/mail.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * Issue 15: events partitioned by month, created ahead by the storage-maintenance job, and the
 * retention settings (EVENT_RETENTION_DAYS, EMAIL_CONTENT_RETENTION_DAYS).
 */

let fixed: Date | null = null;
const clock = { now: () => fixed ?? new Date() };

const monthName = (d: Date) => `events_${d.getUTCFullYear()}_${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
const addMonths = (d: Date, n: number) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, 1));

async function partitionNames(server: TestServer): Promise<string[]> {
  const rows = await server.sql<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass ORDER BY 1`,
  );
  return rows.map((r) => r.name);
}

/** Which partition holds each event of that name. */
async function partitionsOf(server: TestServer, name: string): Promise<string[]> {
  const rows = await server.sql<{ part: string }>(`SELECT tableoid::regclass::text AS part FROM events WHERE name = $1 ORDER BY created_at`, [name]);
  return rows.map((r) => r.part);
}

describe('events partitioned by month', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({}, { clock });
  });
  after(() => server?.stop());

  test('events is range-partitioned on created_at, from this month to three ahead, with a default partition', async () => {
    const [strategy] = await server.sql<{ strategy: string; key: string }>(
      `SELECT p.partstrat AS strategy, pg_get_partkeydef(p.partrelid) AS key FROM pg_partitioned_table p WHERE p.partrelid = 'events'::regclass`,
    );
    assert.deepEqual(strategy, { strategy: 'r', key: 'RANGE (created_at)' });
    const names = await partitionNames(server);
    const now = new Date();
    for (let i = 0; i <= 3; i++) assert.ok(names.includes(monthName(addMonths(now, i))), `${monthName(addMonths(now, i))} in ${names}`);
    assert.ok(names.includes('events_default'));
    const [pk] = await server.sql<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'events'::regclass AND contype = 'p'`,
    );
    assert.equal(pk.def, 'PRIMARY KEY (id, created_at)');
  });

  test('the job creates the current month and three ahead; running it again changes nothing', async () => {
    fixed = new Date('2031-03-10T08:00:00Z');
    try {
      await storageMaintenanceQueue.handler(server.ctx, {}, { id: 'test' });
      const names = await partitionNames(server);
      for (const m of ['events_2031_03', 'events_2031_04', 'events_2031_05', 'events_2031_06']) assert.ok(names.includes(m), `${m} in ${names}`);
      assert.ok(!names.includes('events_2031_07'));
      assert.deepEqual(await maintainEventPartitions(server.ctx), { created: [], dropped: [], deleted: 0 });
      assert.deepEqual(await partitionNames(server), names);
      // Without EVENT_RETENTION_DAYS nothing is dropped, however old.
      assert.ok(names.includes(monthName(new Date())));
    } finally {
      fixed = null;
    }
  });

  test('every partition, emails, contacts, segment members and suppressions have their statistics refreshed after a fixed number of changes, not a tenth of its rows', async () => {
    // A project the last ANALYZE did not see is estimated at one row, and its lists sorted all of
    // its events (docs/decisions.md § Growth): the migration set this on the partitions it made, the job on its own.
    fixed = new Date('2035-02-10T08:00:00Z');
    try {
      assert.deepEqual((await maintainEventPartitions(server.ctx)).created, ['events_2035_02', 'events_2035_03', 'events_2035_04', 'events_2035_05']);
    } finally {
      fixed = null;
    }
    const rows = await server.sql<{ name: string; options: string[] | null }>(
      `SELECT c.relname AS name, c.reloptions AS options FROM pg_class c
        WHERE c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass) OR c.relname IN ('emails', 'contacts', 'segment_members', 'suppressions') ORDER BY 1`,
    );
    const expected = ['autovacuum_analyze_scale_factor=0', `autovacuum_analyze_threshold=${ANALYZE_AFTER_CHANGES}`];
    assert.ok(rows.some((r) => r.name === 'events_2035_02') && rows.some((r) => r.name === 'events_default') && rows.some((r) => r.name === 'emails'));
    assert.ok(rows.some((r) => r.name === 'contacts') && rows.some((r) => r.name === 'segment_members') && rows.some((r) => r.name === 'suppressions'));
    assert.ok(rows.some((r) => r.name === monthName(new Date())));
    for (const r of rows) assert.deepEqual(r.options, expected, r.name);
  });

  test('tracked events are read back in a contact’s timeline, from this month’s partition', async () => {
    const { pk, sk } = await bootstrap(server.api);
    const ids: string[] = [];
    let contactId = '';
    for (const event of ['signup', 'login', 'purchase']) {
      const res = await pk.post('/v1/track', { email: 'timeline@example.com', event, data: { step: event } });
      assert.equal(res.status, 200, res.text);
      ids.push(res.body.data.event);
      contactId = res.body.data.contact;
    }
    const timeline = await sk.get(`/events/contact/${contactId}?limit=10`);
    assert.equal(timeline.status, 200, timeline.text);
    const tracked = timeline.body.data.filter((e: { name: string }) => !e.name.startsWith('contact.'));
    assert.deepEqual(
      tracked.map((e: { id: string; name: string; data: unknown }) => [e.id, e.name, e.data]),
      [
        [ids[2], 'purchase', { step: 'purchase' }],
        [ids[1], 'login', { step: 'login' }],
        [ids[0], 'signup', { step: 'signup' }],
      ],
    );
    assert.deepEqual(await partitionsOf(server, 'purchase'), [monthName(new Date())]);
  });

  test('an event of a month without a partition is recorded in the default partition, and moved into its month when the job creates it', async () => {
    const { pk, sk } = await bootstrap(server.api);
    fixed = new Date('2033-07-04T12:00:00Z');
    try {
      const res = await pk.post('/v1/track', { email: 'future@example.com', event: 'landed' });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.data.timestamp, '2033-07-04T12:00:00.000Z');
      assert.deepEqual(await partitionsOf(server, 'landed'), ['events_default']);

      const run = await maintainEventPartitions(server.ctx);
      assert.deepEqual(run.created, ['events_2033_07', 'events_2033_08', 'events_2033_09', 'events_2033_10']);
      assert.deepEqual(await partitionsOf(server, 'landed'), ['events_2033_07']);
      const [left] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events_default`);
      assert.equal(left.n, 0);

      const list = await sk.get('/events?name=landed');
      assert.equal(list.status, 200, list.text);
      assert.deepEqual(
        list.body.data.map((e: { id: string; createdAt: string }) => [e.id, e.createdAt]),
        [[res.body.data.event, '2033-07-04T12:00:00.000Z']],
      );
    } finally {
      fixed = null;
    }
  });
});

describe('EVENT_RETENTION_DAYS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ EVENT_RETENTION_DAYS: '30' }, { clock });
  });
  after(() => server?.stop());

  test('events older than the setting disappear (whole months dropped, the straddling month trimmed); newer ones stay', async () => {
    const { pk, sk } = await bootstrap(server.api);
    const tracked = await pk.post('/v1/track', { email: 'old@example.com', event: 'seen' });
    assert.equal(tracked.status, 200, tracked.text);
    const contactId = tracked.body.data.contact as string;

    // In February 2030 the job prepares February to May 2030 and drops the migration's months (older than 30 days then).
    fixed = new Date('2030-02-15T00:00:00Z');
    try {
      const first = await maintainEventPartitions(server.ctx);
      assert.deepEqual(first.created, ['events_2030_02', 'events_2030_03', 'events_2030_04', 'events_2030_05']);
      // Older than 30 days in 2030: the migration's months go, with what was tracked today.
      assert.deepEqual(
        first.dropped,
        [0, 1, 2, 3].map((i) => monthName(addMonths(new Date(), i))),
      );
      assert.equal(first.deleted, 0);
    } finally {
      fixed = null;
    }
    const [project] = await server.sql<{ id: string }>(`SELECT project_id AS id FROM contacts WHERE id = $1`, [contactId]);
    for (const [name, at] of [
      ['march', '2030-03-05T10:00:00Z'],
      ['early-may', '2030-05-10T10:00:00Z'],
      ['late-may', '2030-05-25T10:00:00Z'],
      ['june', '2030-06-15T10:00:00Z'],
    ]) {
      await server.sql(`INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES ($1, $2, $3, $4, $5)`, [
        `evt_${name}`,
        project.id,
        contactId,
        name,
        at,
      ]);
    }
    assert.deepEqual(await partitionsOf(server, 'june'), ['events_default']);
    const counted = async () => {
      const stats = await sk.get('/activity/stats?from=2030-03-01&to=2030-06-30');
      const feed = await sk.get('/activity?from=2030-01-01&to=2030-12-31');
      return [stats.body.total, stats.body.counts.event, feed.body.total];
    };
    assert.deepEqual(await counted(), [4, 4, 4]);

    // On 20 June 2030 the cutoff is 21 May: February to April go whole, 10 May is deleted from May.
    fixed = new Date('2030-06-20T00:00:00Z');
    try {
      const run = await maintainEventPartitions(server.ctx);
      assert.deepEqual(run, {
        created: ['events_2030_06', 'events_2030_07', 'events_2030_08', 'events_2030_09'],
        dropped: ['events_2030_02', 'events_2030_03', 'events_2030_04'],
        deleted: 1,
      });
    } finally {
      fixed = null;
    }
    const timeline = await sk.get(`/events/contact/${contactId}`);
    assert.equal(timeline.status, 200, timeline.text);
    assert.deepEqual(
      timeline.body.data.map((e: { name: string; createdAt: string }) => [e.name, e.createdAt]),
      [
        ['june', '2030-06-15T10:00:00.000Z'],
        ['late-may', '2030-05-25T10:00:00.000Z'],
      ],
    );
    assert.deepEqual(await partitionsOf(server, 'june'), ['events_2030_06']);
    // The day counters of the dropped months went with them (whole days of the range are read there).
    assert.deepEqual(await counted(), [2, 2, 2]);
  });
});

describe('EMAIL_CONTENT_RETENTION_DAYS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ EMAIL_CONTENT_RETENTION_DAYS: '30' });
  });
  after(() => server?.stop());

  async function send(sk: Awaited<ReturnType<typeof bootstrap>>['sk'], to: string): Promise<string> {
    const sent = await sk.post('/v1/send', { to, from: 'hello@sandbox.herald.test', subject: 'Receipt', body: `<p>For ${to}</p>`, data: { plan: 'pro' } });
    assert.equal(sent.status, 200, sent.text);
    const id = sent.body.data.emails[0].email as string;
    assert.equal((await waitForStatus(sk, id, ['DELIVERED', 'FAILED'])).status, 'DELIVERED');
    return id;
  }

  test('stored sources older than the setting are cleared: the raw message answers 410, the email record stays', async () => {
    const { sk } = await bootstrap(server.api);
    const old = await send(sk, 'old@example.com');
    const recent = await send(sk, 'recent@example.com');
    await server.sql(`UPDATE email_contents SET created_at = now() - interval '31 days' WHERE id = (SELECT content_id FROM emails WHERE id = $1)`, [old]);

    assert.equal(await clearExpiredEmailContents(server.ctx), 1);
    assert.equal(await clearExpiredEmailContents(server.ctx), 0);

    const raw = await sk.get(`/emails/${old}/raw`);
    assert.equal(raw.status, 410, raw.text);
    assert.equal(raw.body.error.code, 'EMAIL_SOURCE_EXPIRED');
    assert.deepEqual(raw.body.error.details, { resource: 'email', id: old });
    const email = await sk.get(`/emails/${old}`);
    assert.equal(email.status, 200, email.text);
    assert.deepEqual([email.body.status, email.body.subject, email.body.to], ['DELIVERED', 'Receipt', 'old@example.com']);
    const [content] = await server.sql(
      `SELECT c.body_source, c.variables, c.headers, c.attachments, c.cleared_at IS NOT NULL AS cleared FROM email_contents c JOIN emails e ON e.content_id = c.id WHERE e.id = $1`,
      [old],
    );
    assert.deepEqual(content, { body_source: '', variables: {}, headers: {}, attachments: null, cleared: true });

    const kept = await sk.get(`/emails/${recent}/raw`);
    assert.equal(kept.status, 200);
    assert.match(kept.text, /^To: recent@example\.com/m);
  });
});
