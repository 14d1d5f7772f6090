import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import type { DeliveryCounts } from '../campaigns/stats.ts';
import { bucketOf } from './buckets.ts';

/**
 * The email-outcome summaries (db/schema/emails.ts: email_outcome_slots per project and quarter
 * hour, campaign_outcomes per campaign, campaign_outcome_slots per campaign and quarter hour), kept
 * in step by the statements of emails/lifecycle.ts that set an outcome column from NULL — each adds
 * its change here in the same transaction. GET /analytics/timeseries and a campaign's series sum
 * whole slots and read the emails only for the partial slots at the ends of their range; the
 * campaigns' counters and stats and GET /analytics/top-campaigns read the campaign totals.
 */

export type Outcome = keyof DeliveryCounts;
export const OUTCOMES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const satisfies readonly Outcome[];

export type OutcomeChange = { projectId: string; campaignId: string | null; outcome: Outcome; at: Date };

export const SLOT_MS = 15 * 60_000;

const COUNTED = OUTCOMES.map((o) => `count(*) FILTER (WHERE ch.outcome = '${o}')::int`).join(', ');
const COLUMNS = OUTCOMES.join(', ');
const SLOT_OF_AT = `date_bin('15 minutes', ch.at, TIMESTAMPTZ '2000-01-01 00:00:00+00')`;
const added = (table: string) => OUTCOMES.map((o) => `${o} = ${table}.${o} + excluded.${o}`).join(', ');

/**
 * Text of the CTEs that add the rows of CTE `outcome_changes` (project_id, campaign_id, outcome,
 * at: one row per email and outcome that has just happened; the statement's WITH list defines it
 * before these) to the three summaries, project slots first, then campaign totals, then campaign
 * slots, in every statement (one lock order). As plain text so the record of accepted messages can
 * stay one constant named statement (emails/lifecycle.ts). A slot is the quarter hour (UTC) of `at`.
 */
export const OUTCOME_ROLLUP_CTES = `outcome_slots AS (
      INSERT INTO email_outcome_slots AS s (project_id, slot, ${COLUMNS})
      SELECT ch.project_id, ${SLOT_OF_AT}, ${COUNTED} FROM outcome_changes AS ch GROUP BY 1, 2
      ON CONFLICT (project_id, slot) DO UPDATE SET ${added('s')}
    ), outcome_campaigns AS (
      INSERT INTO campaign_outcomes AS c (campaign_id, project_id, ${COLUMNS})
      SELECT ch.campaign_id, ch.project_id, ${COUNTED} FROM outcome_changes AS ch WHERE ch.campaign_id IS NOT NULL GROUP BY 1, 2
      ON CONFLICT (campaign_id) DO UPDATE SET ${added('c')}
    ), outcome_campaign_slots AS (
      INSERT INTO campaign_outcome_slots AS cs (project_id, campaign_id, slot, ${COLUMNS})
      SELECT ch.project_id, ch.campaign_id, ${SLOT_OF_AT}, ${COUNTED} FROM outcome_changes AS ch WHERE ch.campaign_id IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
      ON CONFLICT (project_id, campaign_id, slot) DO UPDATE SET ${added('cs')}
    )`;

/** The statement `WITH outcome_changes AS (<changes>), <OUTCOME_ROLLUP_CTES> SELECT 1`. */
const addOutcomeChanges = (changes: SQL) => sql`WITH outcome_changes AS (${changes}), ${sql.raw(OUTCOME_ROLLUP_CTES)} SELECT 1`;

/** Adds outcomes that just happened, in the caller's transaction (one statement; nothing for an empty list). */
export async function addOutcomes(db: Db, changes: OutcomeChange[]): Promise<void> {
  if (changes.length === 0) return;
  const rows = sql.join(
    changes.map((c) => sql`(${c.projectId}, ${c.campaignId}::uuid, ${c.outcome}, ${c.at.toISOString()}::timestamptz)`),
    sql`, `,
  );
  await db.execute(addOutcomeChanges(sql`SELECT * FROM (VALUES ${rows}) AS v(project_id, campaign_id, outcome, at)`));
}

/** Per-campaign outcome totals (zeros for a campaign that has none yet). */
export async function campaignOutcomeTotals(db: Db, campaignIds: string[]): Promise<Map<string, DeliveryCounts>> {
  const { rows } = await db.execute<DeliveryCounts & { campaign_id: string }>(sql`
    SELECT campaign_id, ${sql.raw(COLUMNS)} FROM campaign_outcomes WHERE campaign_id = ANY(${sql.param(campaignIds)}::uuid[])`);
  return new Map(rows.map(({ campaign_id, ...counts }) => [campaign_id, counts]));
}

/** Whose outcomes: a project's, or one campaign's of it. */
export type OutcomeScope = { projectId: string; campaignId?: string };

/**
 * Rows (m, b, n) of the slot summary for the whole slots in [from, to): the count of each metric
 * per bucket of `interval` in time zone `tz` (a slot lies inside one bucket in every zone in use).
 * A campaign's from its own slots.
 */
export function slotRows(scope: OutcomeScope, from: Date, to: Date, interval: string, tz: string, metrics: readonly Outcome[]): SQL {
  const sums = sql.join(
    metrics.map((m) => sql`sum(s.${sql.identifier(m)})::int AS ${sql.identifier(m)}`),
    sql`, `,
  );
  const values = sql.join(
    metrics.map((m) => sql`(${m}::text, t.${sql.identifier(m)})`),
    sql`, `,
  );
  return sql`
    SELECT v.m, t.b, v.n
      FROM (SELECT ${bucketOf(interval, sql`s.slot`, tz)} AS b, ${sums}
              FROM ${scope.campaignId ? sql`campaign_outcome_slots` : sql`email_outcome_slots`} AS s
             WHERE s.project_id = ${scope.projectId} ${scope.campaignId ? sql`AND s.campaign_id = ${scope.campaignId}::uuid` : sql``} AND s.slot >= ${from.toISOString()}::timestamptz AND s.slot < ${to.toISOString()}::timestamptz
             GROUP BY 1) AS t
     CROSS JOIN LATERAL (VALUES ${values}) AS v(m, n)`;
}

/**
 * Rebuilds one project's summaries from its emails (what migration 0006 did for every project):
 * for data written around lifecycle.ts, such as the analytics benchmark's generated emails.
 */
export async function rebuildOutcomeRollups(db: Db, projectId: string): Promise<void> {
  const changes = sql`
    SELECT e.project_id, e.campaign_id, o.outcome, o.at
      FROM emails AS e
     CROSS JOIN LATERAL (VALUES ('sent', coalesce(e.sent_at, e.bounced_at)), ('delivered', e.delivered_at), ('opened', e.opened_at),
                                ('clicked', e.clicked_at), ('bounced', e.bounced_at), ('complained', e.complained_at)) AS o(outcome, at)
     WHERE e.project_id = ${projectId} AND o.at IS NOT NULL`;
  await db.execute(sql`DELETE FROM email_outcome_slots WHERE project_id = ${projectId}`);
  await db.execute(sql`DELETE FROM campaign_outcomes WHERE project_id = ${projectId}`);
  await db.execute(sql`DELETE FROM campaign_outcome_slots WHERE project_id = ${projectId}`);
  await db.execute(addOutcomeChanges(changes));
}
