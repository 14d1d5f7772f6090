import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';

/**
 * Monthly usage per billing category (decisions.md § 10), counted from the project's emails of the
 * calendar month (UTC) that were not refused (SKIPPED and SUPPRESSED emails never left), plus what
 * a reset deleted this month (billing_usage_carry).
 *
 * - transactional: sent through /v1/send (no campaign, no workflow);
 * - campaigns: written by a campaign; workflows: written by a workflow SEND_EMAIL step;
 * - inbound: Herald receives no inbound mail yet, so its usage is 0 and its cap never bites.
 *
 * The emails are not counted whole each time: `billing_usage_snapshots` holds, per project and
 * month, the counts of the emails created before `counted_before`, and only the emails since then
 * (a range of emails_project_created_idx) are counted on top. A capped writer moves
 * `counted_before` forward (`foldUsageSnapshot`) once enough emails lie behind the cut. Usage stays
 * exact: an email enters the counts only once its status is final for billing (every status but
 * QUEUED and SENDING is: SENT, DELIVERED, BOUNCED, COMPLAINED and FAILED are counted and stay so;
 * SKIPPED and SUPPRESSED are not and stay so). The emails still waiting at a fold are kept by id in
 * the row's `waiting` list and counted as they stand until a later fold finds them settled.
 */

export const CATEGORIES = ['transactional', 'campaigns', 'workflows', 'inbound'] as const;
export type Category = (typeof CATEGORIES)[number];
export type Usage = Record<Category, number>;

const CATEGORY_SQL: Record<Category, SQL> = {
  transactional: sql`e.campaign_id IS NULL AND e.workflow_id IS NULL`,
  campaigns: sql`e.campaign_id IS NOT NULL`,
  workflows: sql`e.workflow_id IS NOT NULL`,
  inbound: sql`false`,
};

const COUNTED = sql`e.status NOT IN ('SKIPPED', 'SUPPRESSED')`;
const WAITING = sql`e.status IN ('QUEUED', 'SENDING')`;

/**
 * Every email created this long ago is visible to a new statement: no transaction that writes
 * emails (a send, a campaign batch, a workflow batch; created_at is the writer's clock, read in
 * the transaction) lasts nearly this long, and clocks of the processes agree far better. A fold
 * never passes emails younger than this, so none can commit behind `counted_before` unseen.
 */
export const VISIBLE_AFTER_MS = 10 * 60_000;
/** A capped writer folds once this many of the counted-on-top emails are older than VISIBLE_AFTER_MS. */
export const FOLD_AFTER_EMAILS = 1000;
/**
 * At most this many waiting emails are kept by id (the newest): a read looks each up by primary
 * key. Older waiting emails past the fold (a backlog of more than this many emails waiting longer
 * than VISIBLE_AFTER_MS) are counted as sent; if delivery refuses one later, it stays counted.
 */
export const WAITING_KEPT = 1000;

export type Period = { start: Date; end: Date; key: string };

/** The calendar month (UTC) containing `now`: [start, end). */
export function periodOf(now: Date): Period {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { start, end, key: start.toISOString().slice(0, 7) };
}

const SENDING_CATEGORIES = CATEGORIES.filter((c) => c !== 'inbound');
type SendingCategory = Exclude<Category, 'inbound'>;

const ts = (d: Date) => sql`${d.toISOString()}::timestamptz`;
const countsOf = (categories: readonly Category[]) =>
  sql.join(
    categories.map((c) => sql`(count(*) FILTER (WHERE ${CATEGORY_SQL[c]} AND ${COUNTED}))::int AS ${sql.identifier(c)}`),
    sql`, `,
  );

/**
 * The month's usage of `categories` in parts: `fresh` is what the emails themselves say (those since
 * the snapshot's `counted_before`, and its waiting ones); `kept` is the snapshot's counts and the
 * reset carry. `foldable`: how many of the emails since `counted_before` a fold at `now` would pass.
 * One statement, so the parts are of one moment.
 */
async function readUsage(db: Db, projectId: string, now: Date, categories: readonly Category[]): Promise<{ fresh: Usage; kept: Usage; foldable: number }> {
  const p = periodOf(now);
  const cut = new Date(now.getTime() - VISIBLE_AFTER_MS);
  const sending = categories.filter((c): c is SendingCategory => c !== 'inbound');
  const perCategory = categories.map(
    (c) => sql`${c === 'inbound' ? sql`0` : sql`tail.${sql.identifier(c)} + listed.${sql.identifier(c)}`} AS ${sql.identifier(`${c}_fresh`)},
      ${c === 'inbound' ? sql`0` : sql`coalesce(s.${sql.identifier(c)}, 0)`}
        + coalesce((SELECT count FROM carried WHERE category = ${c}), 0) AS ${sql.identifier(`${c}_kept`)}`,
  );
  const { rows } = await db.execute<Record<string, number>>(sql`
    WITH snapshot AS (
      SELECT * FROM billing_usage_snapshots WHERE project_id = ${projectId} AND period = ${p.key}
    ), carried AS (
      SELECT category, count FROM billing_usage_carry WHERE project_id = ${projectId} AND period = ${p.key}
    )
    SELECT ${sql.join([...perCategory, sql`tail.foldable`], sql`, `)}
      FROM (
        SELECT ${sending.length > 0 ? sql`${countsOf(sending)}, ` : sql``}
               (count(*) FILTER (WHERE e.created_at < ${ts(cut)}))::int AS foldable
          FROM emails AS e
         WHERE e.project_id = ${projectId}
           AND e.created_at >= coalesce((SELECT counted_before FROM snapshot), ${ts(p.start)})
           AND e.created_at < ${ts(p.end)}
      ) AS tail
     CROSS JOIN (
        SELECT ${sending.length > 0 ? countsOf(sending) : sql`count(*) AS unused`}
          FROM emails AS e
         WHERE e.id = ANY ((SELECT waiting FROM snapshot)::uuid[]) AND e.project_id = ${projectId}
      ) AS listed
      LEFT JOIN snapshot AS s ON true`);
  const row = rows[0];
  const fresh: Usage = { transactional: 0, campaigns: 0, workflows: 0, inbound: 0 };
  const kept: Usage = { ...fresh };
  for (const c of categories) {
    fresh[c] = row[`${c}_fresh`];
    kept[c] = row[`${c}_kept`];
  }
  return { fresh, kept, foldable: row.foldable };
}

export async function monthUsage(db: Db, projectId: string, now: Date, only?: Category): Promise<Usage> {
  const { fresh, kept } = await readUsage(db, projectId, now, only ? [only] : CATEGORIES);
  const usage: Usage = { transactional: 0, campaigns: 0, workflows: 0, inbound: 0 };
  for (const c of CATEGORIES) usage[c] = fresh[c] + kept[c];
  return usage;
}

/** One category's usage for a cap check, and whether the snapshot is worth folding forward now. */
export async function usageForCap(db: Db, projectId: string, now: Date, category: Category): Promise<{ usage: number; foldDue: boolean }> {
  const { fresh, kept, foldable } = await readUsage(db, projectId, now, [category]);
  return { usage: fresh[category] + kept[category], foldDue: foldable >= FOLD_AFTER_EMAILS };
}

/**
 * Moves the snapshot's `counted_before` to `now - VISIBLE_AFTER_MS`: the emails passed (and the
 * previously waiting ones) that are settled go into the counts, those still waiting into `waiting`.
 * Call it in a transaction (a capped writer's, under its billing lock). It takes KEY SHARE on the
 * project row, which a reset's FOR UPDATE excludes (the reset carries the month's fresh usage and
 * deletes the emails under it), so a fold and a reset each see the other whole; and it locks the
 * snapshot row, so two categories' writers fold one after the other.
 */
export async function foldUsageSnapshot(tx: Db, projectId: string, now: Date): Promise<void> {
  const p = periodOf(now);
  const cut = new Date(now.getTime() - VISIBLE_AFTER_MS);
  if (cut <= p.start) return;
  await tx.execute(sql`SELECT 1 FROM projects WHERE id = ${projectId} FOR KEY SHARE`);
  await tx.execute(sql`
    INSERT INTO billing_usage_snapshots (project_id, period, counted_before) VALUES (${projectId}, ${p.key}, ${ts(p.start)})
    ON CONFLICT (project_id, period) DO UPDATE SET counted_before = billing_usage_snapshots.counted_before`);
  await tx.execute(sql`DELETE FROM billing_usage_snapshots WHERE project_id = ${projectId} AND period <> ${p.key}`);
  await tx.execute(sql`
    WITH s AS (
      SELECT counted_before, waiting FROM billing_usage_snapshots WHERE project_id = ${projectId} AND period = ${p.key}
    ), seen AS (
      SELECT e.id, e.created_at, e.status, e.campaign_id, e.workflow_id
        FROM emails AS e
       WHERE e.project_id = ${projectId} AND e.created_at >= (SELECT counted_before FROM s) AND e.created_at < ${ts(cut)}
      UNION ALL
      SELECT e.id, e.created_at, e.status, e.campaign_id, e.workflow_id
        FROM emails AS e
       WHERE e.id = ANY ((SELECT waiting FROM s)::uuid[]) AND e.project_id = ${projectId}
    ), passed AS (
      -- One pass over the emails (a CTE read twice is stored whole; an ordered aggregate sorts every row): the counted
      -- ones, and the waiting ones' ids and times.
      SELECT ${countsOf(SENDING_CATEGORIES)},
             array_agg(e.id) FILTER (WHERE ${WAITING}) AS waiting_ids, array_agg(e.created_at) FILTER (WHERE ${WAITING}) AS waiting_at
        FROM seen AS e
    ), still_waiting AS (
      SELECT ARRAY(
        SELECT w.id FROM passed, unnest(passed.waiting_ids, passed.waiting_at) AS w(id, at) ORDER BY w.at DESC LIMIT ${WAITING_KEPT}
      ) AS ids
    ), kept AS (
      -- The waiting ones kept by id leave the counts (they are counted: no waiting status is refused).
      SELECT ${countsOf(SENDING_CATEGORIES)} FROM emails AS e WHERE e.id = ANY ((SELECT ids FROM still_waiting)::uuid[]) AND e.project_id = ${projectId}
    )
    UPDATE billing_usage_snapshots AS b
       SET counted_before = ${ts(cut)},
           ${sql.join(
             SENDING_CATEGORIES.map((c) => sql`${sql.identifier(c)} = b.${sql.identifier(c)} + passed.${sql.identifier(c)} - kept.${sql.identifier(c)}`),
             sql`, `,
           )},
           waiting = still_waiting.ids
      FROM passed, still_waiting, kept
     WHERE b.project_id = ${projectId} AND b.period = ${p.key} AND b.counted_before < ${ts(cut)}`);
}

/**
 * A CTE for the statement of a reset that deletes emails, `WITH removed AS (DELETE FROM emails AS e …
 * RETURNING e.id, e.created_at, e.status, e.campaign_id, e.workflow_id), carried AS (<this>) …`: the
 * month's usage of the emails it deletes goes to the carry, so a reset never gives the allowance
 * back. They are the emails readUsage counts as `fresh` (this month's since the snapshot's
 * `counted_before`, and the snapshot's waiting ones); the snapshot's own counts stay, as they count
 * emails before `counted_before`, deleted or not. Run it holding the project row FOR UPDATE (see
 * foldUsageSnapshot).
 */
export function carryUsageOfRemoved(projectId: string, now: Date, removed: string): SQL {
  const p = periodOf(now);
  return sql`
    WITH snapshot AS (
      SELECT counted_before, waiting FROM billing_usage_snapshots WHERE project_id = ${projectId} AND period = ${p.key}
    ), fresh AS (
      SELECT ${countsOf(SENDING_CATEGORIES)} FROM ${sql.identifier(removed)} AS e
       WHERE (e.created_at >= coalesce((SELECT counted_before FROM snapshot), ${ts(p.start)}) AND e.created_at < ${ts(p.end)})
          OR e.id = ANY ((SELECT waiting FROM snapshot)::uuid[])
    )
    INSERT INTO billing_usage_carry AS b (project_id, period, category, count)
    SELECT ${projectId}, ${p.key}, c.category, c.count
      FROM fresh CROSS JOIN LATERAL (VALUES ${sql.join(
        SENDING_CATEGORIES.map((c) => sql`(${c}, fresh.${sql.identifier(c)})`),
        sql`, `,
      )}) AS c(category, count)
     WHERE c.count > 0
    ON CONFLICT (project_id, period, category) DO UPDATE SET count = b.count + excluded.count`;
}
