import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { splitDays } from '../events/day-counts.ts';
import { type TimeRange, inRange, rangeEcho, spanOf, spanSql, splitSpan } from '../events/range.ts';
import { typeCondition } from '../activity/types.ts';
import { OUTCOME_TIME, campaignStats } from '../campaigns/stats.ts';
import { type Outcome, type OutcomeScope, SLOT_MS, campaignOutcomeTotals, slotRows } from './outcome-rollups.ts';
import type { CampaignStats } from '../campaigns/schemas.ts';
import { METRICS, type Metric, type Point } from './schemas.ts';
import { bucketOf, bucketSeries, bucketStartText } from './buckets.ts';

/**
 * The four analytics endpoints, computed in SQL. Email outcomes are counted per email (an email
 * opened five times is one open) at the time of the outcome, from the same columns and rules as
 * GET /campaigns/:id/stats (campaigns/stats.ts); unsubscribes and event counts come from the events
 * table, as GET /activity/stats counts them. Whole quarter hours come from the outcome summary
 * (outcome-rollups.ts), the rest are index-only range scans of each outcome's partial index
 * (emails_project_<outcome>_at_idx); buckets are zero-filled in the project's time zone: absolute
 * hours, local days and weeks (buckets.ts).
 */

type Interval = 'hour' | 'day' | 'week';

/** A time span as an SQL condition on a timestamp column. */
type Within = (column: SQL) => SQL;

/** Rows (m, b, n): each email outcome counted per local bucket from the project's (or campaign's) emails in `within`. */
function emailRows(scope: OutcomeScope, within: Within, interval: Interval, tz: string, metrics: readonly Outcome[]): SQL[] {
  const ofCampaign = scope.campaignId ? sql`AND e.campaign_id = ${scope.campaignId}::uuid` : sql``;
  const count = (m: Outcome, column: string, extra: SQL = sql``) => {
    const col = sql.identifier(column);
    return sql`
      SELECT ${m}::text AS m, ${bucketOf(interval, sql`e.${col}`, tz)} AS b, count(*)::int AS n
        FROM emails AS e
       WHERE e.project_id = ${scope.projectId} ${ofCampaign} AND e.${col} IS NOT NULL AND ${within(sql`e.${col}`)} ${extra}
       GROUP BY 2`;
  };
  return metrics.flatMap((m) => [
    count(m, OUTCOME_TIME[m]),
    // A message the relay refused at once was sent (and bounced) at its bounce time (campaigns/stats.ts).
    ...(m === 'sent' ? [count(m, OUTCOME_TIME.bounced, sql`AND e.sent_at IS NULL`)] : []),
  ]);
}

/**
 * Counted rows per (metric, local bucket) for the project, optionally one campaign: the whole
 * quarter-hour slots inside the range from the outcome summaries, and only the partial slots at
 * its ends from the emails (outcome-rollups.ts). A campaign's series read every one of its emails
 * before its own slots (campaign_outcome_slots): 1.8 s for a campaign of 1,000,000.
 */
function metricRows(projectId: string, r: TimeRange, interval: Interval, tz: string, metrics: readonly Metric[], campaignId?: string): SQL {
  const outcomes = metrics.filter((m): m is Outcome => m !== 'unsubscribed');
  const parts: SQL[] = [];
  if (metrics.includes('unsubscribed')) {
    // A campaign's: its recipients' first unsubscribes after its email (campaigns/stats.ts), so the
    // series adds up to its stats' unsubscribedCount. No event names its campaign.
    const [at, rows] = campaignId
      ? [sql`cu.unsubscribed_at`, sql`campaign_unsubscribes AS cu WHERE cu.project_id = ${projectId} AND cu.campaign_id = ${campaignId}`]
      : [sql`ev.created_at`, sql`events AS ev WHERE ev.project_id = ${projectId} AND ev.name = 'contact.unsubscribed'`];
    parts.push(sql`
      SELECT 'unsubscribed'::text AS m, ${bucketOf(interval, at, tz)} AS b, count(*)::int AS n
        FROM ${rows} AND ${inRange(at, r)}
       GROUP BY 2`);
  }
  if (outcomes.length > 0) {
    const scope: OutcomeScope = { projectId, campaignId };
    const { whole, partial } = splitSpan(spanOf(r), SLOT_MS);
    if (!whole) {
      parts.push(...emailRows(scope, (col) => inRange(col, r), interval, tz, outcomes));
    } else {
      parts.push(slotRows(scope, whole.from!, whole.to!, interval, tz, outcomes));
      for (const p of partial) parts.push(...emailRows(scope, (col) => sql.join(spanSql(col, p), sql` AND `), interval, tz, outcomes));
    }
  }
  return sql.join(parts, sql` UNION ALL `);
}

export type Series = { interval: Interval; timezone: string; from: string; to: string; totals: Partial<Record<Metric, number>>; points: Point[] };

export async function timeseries(
  db: Db,
  projectId: string,
  q: { range: TimeRange; interval: Interval; timezone: string; metric?: Metric; campaignId?: string },
): Promise<Series> {
  const metrics = q.metric ? [q.metric] : METRICS;
  const echo = rangeEcho(q.range);
  const tz = q.timezone;
  const { rows } = await db.execute<Record<string, number | string>>(sql`
    WITH buckets AS (${bucketSeries(q.interval, echo.from, echo.to, tz)}),
         data AS (${metricRows(projectId, q.range, q.interval, tz, metrics, q.campaignId)})
    SELECT ${bucketStartText(q.interval, sql`bk.b`, tz)} AS t,
           ${sql.join(
             metrics.map((m) => sql`coalesce(sum(d.n) FILTER (WHERE d.m = ${m}), 0)::int AS ${sql.identifier(m)}`),
             sql`, `,
           )}
      FROM buckets AS bk LEFT JOIN data AS d ON d.b = bk.b
     GROUP BY bk.b ORDER BY bk.b`);
  const totals: Partial<Record<Metric, number>> = {};
  for (const m of metrics) totals[m] = rows.reduce((n, r) => n + Number(r[m]), 0);
  return { interval: q.interval, timezone: tz, ...echo, totals, points: rows as Point[] };
}

const percent = (part: number, whole: number) => (whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 100);

export type TopCampaign = {
  id: string;
  name: string;
  status: string;
  sentAt: string | null;
  sent: number;
  delivered: number;
  opens: number;
  clicks: number;
  bounced: number;
  complained: number;
  openRate: number;
  clickRate: number;
};

const ORDER: Record<'opens' | 'clicks' | 'sent' | 'openRate' | 'clickRate', (c: TopCampaign) => number> = {
  opens: (c) => c.opens,
  clicks: (c) => c.clicks,
  sent: (c) => c.sent,
  openRate: (c) => c.openRate,
  clickRate: (c) => c.clickRate,
};

/**
 * The newest 1,000 campaigns that started sending in the range, read from their own index entries
 * (migration 0024): without them, every sent campaign of the project in the range was read and
 * sorted, and campaigns have no cap.
 */
export const sentCampaignsQuery = (projectId: string, range: TimeRange): SQL => sql`
    SELECT c.id, c.name, c.status, to_char(c.sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS sent_at
      FROM campaigns AS c
     WHERE c.project_id = ${projectId} AND c.sent_at IS NOT NULL AND ${inRange(sql`c.sent_at`, range)}
     ORDER BY c.sent_at DESC
     LIMIT 1000`;

/** Campaigns that started sending in the range, ranked by `metric`; counts as in GET /campaigns/:id/stats. */
export async function topCampaigns(
  db: Db,
  projectId: string,
  q: { range: TimeRange; metric: keyof typeof ORDER; limit: number },
): Promise<{ from: string; to: string; metric: string; data: TopCampaign[] }> {
  const { rows } = await db.execute<{ id: string; name: string; status: string; sent_at: string | null }>(sentCampaignsQuery(projectId, q.range));
  const counts = await campaignOutcomeTotals(
    db,
    rows.map((r) => r.id),
  );
  const ranked = rows.map((r): TopCampaign => {
    const c = counts.get(r.id) ?? { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0 };
    return {
      id: r.id,
      name: r.name,
      status: r.status,
      sentAt: r.sent_at,
      sent: c.sent,
      delivered: c.delivered,
      opens: c.opened,
      clicks: c.clicked,
      bounced: c.bounced,
      complained: c.complained,
      openRate: percent(c.opened, c.sent),
      clickRate: percent(c.clicked, c.sent),
    };
  });
  ranked.sort((a, b) => ORDER[q.metric](b) - ORDER[q.metric](a) || b.sent - a.sent || a.id.localeCompare(b.id));
  return { ...rangeEcho(q.range), metric: q.metric, data: ranked.slice(0, q.limit) };
}

/** One campaign: its stats (as GET /campaigns/:id/stats), its funnel over time, and clicks per link. */
export async function campaignBreakdown(
  db: Db,
  campaign: { id: string; projectId: string; name: string; totalRecipients: number },
  q: { range: TimeRange; interval: Interval; timezone: string },
): Promise<{ campaign: { id: string; name: string }; stats: CampaignStats; series: Series; links: { url: string; clicks: number; uniqueClicks: number }[] }> {
  const [stats, series, links] = await Promise.all([
    campaignStats(db, campaign),
    timeseries(db, campaign.projectId, { ...q, campaignId: campaign.id }),
    db.execute<{ url: string; clicks: number; unique_clicks: number }>(sql`
      SELECT ev.data->>'link' AS url, count(*)::int AS clicks, count(DISTINCT ev.data->>'emailId')::int AS unique_clicks
        FROM events AS ev
       WHERE (ev.data->>'campaignId') = ${campaign.id} AND ev.name = 'email.clicked' AND ev.project_id = ${campaign.projectId}
       GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 100`),
  ]);
  return {
    campaign: { id: campaign.id, name: campaign.name },
    stats,
    series,
    links: links.rows.map((l) => ({ url: l.url, clicks: l.clicks, uniqueClicks: l.unique_clicks })),
  };
}

/**
 * Tracked (custom) event names in the range, most frequent first, with the contacts that did them.
 * Counts: the whole UTC days inside the range from the day rollup, the partial first and last days
 * from the events. Unique contacts (exact): from each contact's first/last event of the name — one
 * of them in the range means the contact did it in the range; only contacts whose events straddle
 * the whole range are looked up in the events (rollups.ts).
 */
export async function topEvents(
  db: Db,
  projectId: string,
  q: { range: TimeRange; limit: number },
): Promise<{ from: string; to: string; data: { name: string; count: number; uniqueContacts: number }[] }> {
  const r = q.range;
  const span = spanOf(r);
  const { days, partial } = splitDays(span);
  const { at, inclusive } = span.end!;
  // A last event past the range's end (after an inclusive end; at or after an exclusive one).
  const after = inclusive ? sql`p.last_at > ${at.toISOString()}::timestamptz` : sql`p.last_at >= ${at.toISOString()}::timestamptz`;
  const counted = partial.map(
    (conds) => sql`
      SELECT e.name, count(*)::bigint AS n FROM events AS e WHERE e.project_id = ${projectId} AND ${sql.join(conds, sql` AND `)} AND ${typeCondition('event')} GROUP BY e.name`,
  );
  if (days) {
    counted.push(sql`
      SELECT e.name, sum(e.count)::bigint AS n FROM event_name_days AS e WHERE e.project_id = ${projectId} AND ${sql.join(days, sql` AND `)} GROUP BY e.name`);
  }
  const { rows } = await db.execute<{ name: string; count: number; unique_contacts: number }>(sql`
    WITH counted AS (${sql.join(counted, sql` UNION ALL `)}
    ), top AS (
      SELECT c.name, sum(c.n)::int AS count FROM counted AS c GROUP BY c.name HAVING sum(c.n) > 0 ORDER BY 2 DESC, 1 LIMIT ${q.limit}
    )
    SELECT t.name, t.count,
           (SELECT count(*)::int FROM event_name_contacts AS p
             WHERE p.project_id = ${projectId} AND p.name = t.name
               AND (${inRange(sql`p.first_at`, r)} OR ${inRange(sql`p.last_at`, r)}
                    OR (p.first_at < ${r.from.toISOString()}::timestamptz AND ${after}
                        AND EXISTS (SELECT 1 FROM events AS e
                                     WHERE e.contact_id = p.contact_id AND e.name = p.name AND ${inRange(sql`e.created_at`, r)})))) AS unique_contacts
      FROM top AS t
     ORDER BY t.count DESC, t.name`);
  return { ...rangeEcho(r), data: rows.map((x) => ({ name: x.name, count: x.count, uniqueContacts: x.unique_contacts })) };
}
