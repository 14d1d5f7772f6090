import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { DAY_MS, type Span, spanSql, splitSpan, utcDate } from './range.ts';

/**
 * Events counted over a time range, exactly, at a cost that does not grow with the events in it:
 * the range's whole UTC days are summed from event_day_counts (db/schema/events.ts, kept by the
 * triggers of migration 0012), and only its partial first and last days are counted in the events,
 * each a tight range of events_project_created_idx (bench/README.md § analytics).
 */

/**
 * The span as whole UTC days (conditions on `e.day` of a per-day summary; null when none fits) and
 * partial spans (conditions on `e.created_at`), for a summary per (name, day) aliased `e`.
 */
export function splitDays(span: Span): { days: SQL[] | null; partial: SQL[][] } {
  const { whole, partial } = splitSpan(span, DAY_MS);
  const days: SQL[] = [];
  if (whole?.from) days.push(sql`e.day >= ${utcDate(whole.from)}::date`);
  if (whole?.to) days.push(sql`e.day < ${utcDate(whole.to)}::date`);
  return { days: whole ? days : null, partial: partial.map((p) => spanSql(sql`e.created_at`, p)) };
}

/**
 * The project's events in the span per `key` (by default the name; an expression over a row
 * aliased `e` with a `name`, as activity/types.ts TYPE_OF_NAME), for the names meeting `names`
 * (also over `e`, as typeCondition); keys with no events are left out.
 */
export async function countBy(db: Db, projectId: string, span: Span, opts: { key?: SQL; names?: SQL } = {}): Promise<Map<string, number>> {
  const { days, partial } = splitDays(span);
  const key = opts.key ?? sql`e.name`;
  const named = opts.names === undefined ? sql`` : sql` AND ${opts.names}`;
  const parts: SQL[] = partial.map(
    (conds) =>
      sql`SELECT ${key} AS key, count(*) AS n FROM events AS e WHERE e.project_id = ${projectId} AND ${sql.join(conds, sql` AND `)}${named} GROUP BY 1`,
  );
  if (days) {
    const within = days.length > 0 ? sql` AND ${sql.join(days, sql` AND `)}` : sql``;
    parts.push(sql`SELECT ${key} AS key, sum(e.count) AS n FROM event_day_counts AS e WHERE e.project_id = ${projectId}${within}${named} GROUP BY 1`);
  }
  const { rows } = await db.execute<{ key: string; n: string }>(sql`
    SELECT c.key, sum(c.n)::bigint AS n FROM (${sql.join(parts, sql` UNION ALL `)}) AS c GROUP BY c.key HAVING sum(c.n) <> 0`);
  return new Map(rows.map((r) => [r.key, Number(r.n)]));
}

/** The project's events in the span whose name meets `names`. */
export async function countInSpan(db: Db, projectId: string, span: Span, names?: SQL): Promise<number> {
  const [total] = (await countBy(db, projectId, span, { key: sql`''`, names })).values();
  return total ?? 0;
}
