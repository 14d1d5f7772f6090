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

export type Period = { start: Date; end: Date; key: string };

/** The calendar month (UTC) containing `now`: [start, end). */
export function periodOf(now: Date): Period {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { start, end, key: start.toISOString().slice(0, 7) };
}

const SENDING_CATEGORIES = CATEGORIES.filter((c) => c !== 'inbound');

/** This period's counted emails per category, in one scan of emails_project_created_idx. */
async function emailCounts(db: Db, projectId: string, p: Period, categories: readonly Category[]): Promise<Partial<Usage>> {
  const { rows } = await db.execute<Partial<Usage>>(sql`
    SELECT ${sql.join(
      categories.map((c) => sql`(count(*) FILTER (WHERE ${CATEGORY_SQL[c]}))::int AS ${sql.identifier(c)}`),
      sql`, `,
    )}
      FROM emails AS e
     WHERE e.project_id = ${projectId}
       AND e.created_at >= ${p.start.toISOString()}::timestamptz AND e.created_at < ${p.end.toISOString()}::timestamptz
       AND ${COUNTED}`);
  return rows[0] ?? {};
}

export async function monthUsage(db: Db, projectId: string, now: Date, only?: Category): Promise<Usage> {
  const p = periodOf(now);
  const categories = only ? (only === 'inbound' ? [] : [only]) : SENDING_CATEGORIES;
  const counts = categories.length > 0 ? await emailCounts(db, projectId, p, categories) : {};
  const carried = await db.execute<{ category: Category; count: number }>(sql`
    SELECT category, count FROM billing_usage_carry WHERE project_id = ${projectId} AND period = ${p.key}`);
  const usage: Usage = { transactional: 0, campaigns: 0, workflows: 0, inbound: 0 };
  for (const c of categories) usage[c] = counts[c] ?? 0;
  for (const r of carried.rows) if (!only || r.category === only) usage[r.category] += r.count;
  return usage;
}

/** Before a reset deletes the emails: keep this month's usage so the allowance is not restored. */
export async function carryMonthUsage(db: Db, projectId: string, now: Date): Promise<void> {
  const p = periodOf(now);
  const counts = await emailCounts(db, projectId, p, SENDING_CATEGORIES);
  for (const category of SENDING_CATEGORIES) {
    const count = counts[category] ?? 0;
    if (count === 0) continue;
    await db.execute(sql`
      INSERT INTO billing_usage_carry (project_id, period, category, count) VALUES (${projectId}, ${p.key}, ${category}, ${count})
      ON CONFLICT (project_id, period, category) DO UPDATE SET count = billing_usage_carry.count + EXCLUDED.count`);
  }
}
