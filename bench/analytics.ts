import { performance } from 'node:perf_hooks';
import { SERVICE_EVENT_NAME_TEXT } from '../src/modules/activity/types.ts';
import { rebuildOutcomeRollups } from '../src/modules/analytics/outcome-rollups.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { printMachine, verdict, withBenchDatabase } from './lib.ts';

/**
 * Analytics benchmark: one project with 1,000,000 emails and 5,000,000 events spread over a year
 * (generated in SQL), then each of the four analytics endpoints over 30 and 365 days, 50 calls
 * each through HTTP; median and p95. Target: each under 300 ms at 365 days.
 */

const EMAILS = Number(process.env.BENCH_EMAILS ?? 1_000_000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 5_000_000);
const CONTACTS = 50_000;
const CAMPAIGNS = 200;
const CALLS = 50;
const TARGET_MS = 300;

export async function run(): Promise<void> {
  printMachine('Herald analytics benchmark');
  await withBenchDatabase(async (databaseUrl) => {
    // API role only: no job workers (the reputation guard would disable a project with 2 % bounces mid-run).
    const server = await startTestServer({ PROCESS_ROLE: 'api', API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
    try {
      const b = await bootstrap(server.api, 'bench-analytics');
      const p = b.project.id;
      const t0 = performance.now();
      await generate(server.sql, p);
      // The email-outcome summaries, as migration 0006 fills them from existing emails.
      await rebuildOutcomeRollups(server.ctx.database.db, p);
      await server.sql('VACUUM ANALYZE email_outcome_slots');
      await server.sql('VACUUM ANALYZE campaign_outcomes');
      console.log(
        `generated ${EMAILS.toLocaleString('en-US')} emails, ${EVENTS.toLocaleString('en-US')} events in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
      );
      const [{ id: campaignId }] = await server.sql<{ id: string }>('SELECT id FROM campaigns WHERE project_id = $1 ORDER BY sent_at DESC LIMIT 1', [p]);

      const now = Date.now();
      const rangeOf = (days: number) => `from=${new Date(now - days * 86_400_000).toISOString()}&to=${new Date(now).toISOString()}`;
      const endpoints: [string, (r: string) => string][] = [
        ['timeseries (day)', (r) => `/analytics/timeseries?interval=day&${r}`],
        ['top-campaigns (opens)', (r) => `/analytics/top-campaigns?metric=opens&limit=10&${r}`],
        ['campaign-stats', (r) => `/analytics/campaign-stats?campaignId=${campaignId}&${r}`],
        ['top-events', (r) => `/analytics/top-events?limit=10&${r}`],
      ];
      const timed = async (path: string): Promise<{ median: number; p95: number }> => {
        const times: number[] = [];
        for (let i = 0; i < CALLS; i++) {
          const start = performance.now();
          const res = await b.sk.get(path);
          times.push(performance.now() - start);
          if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
        }
        times.sort((x, y) => x - y);
        return { median: times[Math.floor(CALLS / 2)], p95: times[Math.ceil(CALLS * 0.95) - 1] };
      };
      const row = (name: string, range: string, t: { median: number; p95: number }) =>
        console.log(`${name.padEnd(30)} ${range.padStart(6)} ${t.median.toFixed(1).padStart(7)} ms ${t.p95.toFixed(1).padStart(7)} ms`);
      console.log(`endpoint                        range   median     p95   (${CALLS} calls each, sequential, through HTTP)`);
      let allMet = true;
      for (const [name, path] of endpoints) {
        for (const days of [30, 365]) {
          const t = await timed(path(rangeOf(days)));
          if (days === 365 && t.median >= TARGET_MS) allMet = false;
          row(name, `${days} d`, t);
        }
      }
      // The event, activity and email reads of the dashboard on the same data: stats over a range,
      // first pages (with their `total`), and the lists of names and types.
      console.log('');
      for (const [name, path] of EVENT_READS) {
        const ranged = path.includes('{range}');
        for (const days of ranged ? [30, 365] : [0]) {
          const t = await timed(path.replace('{range}', rangeOf(days)));
          if (t.median >= TARGET_MS) allMet = false;
          row(name, ranged ? `${days} d` : '', t);
        }
      }
      console.log(`\ntarget (each median under ${TARGET_MS} ms; analytics at 365 days): ${verdict(allMet)}`);
    } finally {
      await server.stop();
    }
  });
}

/** The reads timed after the analytics endpoints; `{range}` is replaced by 30 and 365 days. */
const EVENT_READS: [string, string][] = [
  ['events/stats', '/events/stats?{range}'],
  ['activity/stats', '/activity/stats?{range}'],
  ['activity (first page)', '/activity?limit=50'],
  ['activity types=email.opened', '/activity?limit=50&types=email.opened'],
  ['activity types=event', '/activity?limit=50&types=event'],
  ['activity (range)', '/activity?limit=50&{range}'],
  ['activity/types', '/activity/types'],
  ['activity/recent-count', '/activity/recent-count?minutes=60'],
  ['events (first page)', '/events?limit=50'],
  ['events/names', '/events/names'],
  ['emails (first page)', '/emails?limit=50'],
  ['emails status=COMPLAINED', '/emails?limit=50&status=COMPLAINED'],
  ['campaigns (page of 100)', '/campaigns?pageSize=100'],
];

type Sql = (text: string, values?: unknown[]) => Promise<unknown[]>;

/** The data set, in SQL: contacts, campaigns over the year, emails with outcomes, events. */
export async function generate(sql: Sql, p: string): Promise<void> {
  await sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
     SELECT 'cnt_bench' || lpad(i::text, 8, '0'), $1, 'c' || i || '@bench.example.com', true, now() - interval '400 days', now()
       FROM generate_series(1, $2) AS i`,
    [p, CONTACTS],
  );
  await sql(
    `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status, total_recipients, sent_at, completed_at, created_at, updated_at)
     SELECT (lpad(to_hex(i), 8, '0') || '-0000-7000-8000-000000000000')::uuid, $1, 'Campaign ' || i, 'S', '<p>B</p>', 'news@bench.example.com', 'SENT', 0,
            now() - (i * interval '1 day' * 365 / $2), now() - (i * interval '1 day' * 365 / $2), now() - interval '400 days', now()
       FROM generate_series(1, $2) AS i`,
    [p, CAMPAIGNS],
  );
  // Emails: 60 % campaign mail (spread over the campaigns, one per contact and campaign), the rest transactional; outcomes by
  // fixed fractions (90 % delivered, 30 % opened, 8 % clicked, 2 % bounced, 0.1 % complained).
  await sql(
    `WITH content AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, '<p>B</p>') RETURNING id)
     INSERT INTO emails (id, project_id, contact_id, to_email, from_email, type, subject_source, content_id, campaign_id, status,
                         sent_at, delivered_at, opened_at, clicked_at, open_count, click_count, bounced_at, complained_at, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'cnt_bench' || lpad((1 + (i / $4) % $3)::text, 8, '0'), 'c' || (1 + (i / $4) % $3) || '@bench.example.com',
            'news@bench.example.com', CASE WHEN i % 10 < 6 THEN 'MARKETING' ELSE 'TRANSACTIONAL' END, 'S', (SELECT id FROM content),
            CASE WHEN i % 10 < 6 THEN (lpad(to_hex(1 + i % $4), 8, '0') || '-0000-7000-8000-000000000000')::uuid END,
            CASE WHEN i % 50 = 0 THEN 'BOUNCED' WHEN i % 1000 = 1 THEN 'COMPLAINED' WHEN i % 10 < 9 THEN 'DELIVERED' ELSE 'SENT' END,
            at, CASE WHEN i % 10 < 9 AND i % 50 <> 0 THEN at + interval '2 seconds' END,
            CASE WHEN i % 10 < 3 AND i % 50 <> 0 THEN at + interval '1 hour' END,
            CASE WHEN i % 100 < 8 AND i % 50 <> 0 THEN at + interval '90 minutes' END,
            CASE WHEN i % 10 < 3 AND i % 50 <> 0 THEN 1 ELSE 0 END, CASE WHEN i % 100 < 8 AND i % 50 <> 0 THEN 1 ELSE 0 END,
            CASE WHEN i % 50 = 0 THEN at + interval '5 seconds' END, CASE WHEN i % 1000 = 1 THEN at + interval '1 day' END,
            at, at
       FROM (SELECT i, now() - (random() * interval '365 days') AS at FROM generate_series(1, $2) AS i) AS g`,
    [p, EMAILS, CONTACTS, CAMPAIGNS],
  );
  // Events: 60 % tracked events over 25 names, the rest email.* events (clicks carry campaign and link).
  await sql(
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT 'evt_bench' || lpad(i::text, 10, '0'), $1, 'cnt_bench' || lpad((1 + i % $3)::text, 8, '0'),
            CASE WHEN i % 10 < 6 THEN 'event_' || (i % 25)
                 WHEN i % 10 < 8 THEN 'email.sent' WHEN i % 10 = 8 THEN 'email.opened' ELSE 'email.clicked' END,
            CASE WHEN i % 10 = 9 THEN jsonb_build_object('campaignId', lpad(to_hex(1 + i % $4), 8, '0') || '-0000-7000-8000-000000000000',
                                                         'link', 'https://example.com/l' || (i % 7))
                 ELSE jsonb_build_object('plan', 'pro') END,
            now() - (random() * interval '365 days')
       FROM generate_series(1, $2) AS i`,
    [p, EVENTS, CONTACTS, CAMPAIGNS],
  );
  // The rollups the events insert maintains (analytics/rollups.ts), as the migration backfills them.
  const custom = `NOT ${SERVICE_EVENT_NAME_TEXT}`;
  await sql(
    `INSERT INTO event_name_days (project_id, name, day, shard, count)
     SELECT e.project_id, e.name, (e.created_at AT TIME ZONE 'UTC')::date, 0, count(*) FROM events AS e WHERE e.project_id = $1 AND ${custom} GROUP BY 1, 2, 3`,
    [p],
  );
  await sql(
    `INSERT INTO event_name_contacts (project_id, name, contact_id, first_at, last_at)
     SELECT e.project_id, e.name, e.contact_id, min(e.created_at), max(e.created_at) FROM events AS e
      WHERE e.project_id = $1 AND e.contact_id IS NOT NULL AND ${custom} GROUP BY 1, 2, 3`,
    [p],
  );
  await sql('VACUUM ANALYZE emails');
  await sql('VACUUM ANALYZE events');
  await sql('VACUUM ANALYZE campaigns');
  await sql('VACUUM ANALYZE event_name_days');
  await sql('VACUUM ANALYZE event_name_contacts');
}
