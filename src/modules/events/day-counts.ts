import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { type TimeRange, toTimeRange } from './range.ts';

/**
 * Events counted over a time range, exactly, at a cost that does not grow with the events in it:
 * the range's whole UTC days are summed from event_day_counts (db/schema/events.ts, kept by the
 * triggers of migration 0012), and only its partial first and last days are counted in the events,
 * each a tight range of events_project_created_idx (bench/README.md § analytics).
 */

const DAY_MS = 86_400_000;

/** A range whose ends may be open: `from` inclusive; `end` inclusive or not (a day `to` ends before the next midnight). */
export type Span = { from?: Date; end?: { at: Date; inclusive: boolean } };

export const spanOf = (r: TimeRange): Span => ({
  from: r.from,
  end: r.toDay ? { at: new Date(r.to.getTime() + DAY_MS), inclusive: false } : { at: r.to, inclusive: true },
});

/** `?from=&to=` of a list, each optional (events/range.ts boundsSql): the ends given. */
export function spanOfBounds(q: { from?: string; to?: string }): Span {
  const r = spanOf(toTimeRange({ from: q.from ?? '1970-01-01', to: q.to ?? '9999-12-31' }, new Date()));
  return { from: q.from === undefined ? undefined : r.from, end: q.to === undefined ? undefined : r.end };
}

const iso = (d: Date) => sql`${d.toISOString()}::timestamptz`;
const utcDay = (ms: number) => sql`${new Date(ms).toISOString().slice(0, 10)}::date`;

/**
 * The span cut into whole UTC days (conditions on `e.day`) and partial ones (conditions on
 * `e.created_at`). A day is whole only when the span covers all of it: an inclusive end at
 * midnight leaves that instant as a partial day of its own.
 */
export function splitSpan(span: Span): { days: SQL[] | null; partial: SQL[][] } {
  const from = span.from?.getTime();
  const end = span.end?.at.getTime();
  const wholeFrom = from === undefined ? undefined : Math.ceil(from / DAY_MS) * DAY_MS;
  const wholeTo = end === undefined ? undefined : Math.floor(end / DAY_MS) * DAY_MS;
  const endCondition = span.end ? [span.end.inclusive ? sql`e.created_at <= ${iso(span.end.at)}` : sql`e.created_at < ${iso(span.end.at)}`] : [];
  if (wholeFrom !== undefined && wholeTo !== undefined && wholeFrom >= wholeTo) {
    return { days: null, partial: [[sql`e.created_at >= ${iso(span.from!)}`, ...endCondition]] };
  }
  const days: SQL[] = [];
  const partial: SQL[][] = [];
  if (wholeFrom !== undefined) {
    days.push(sql`e.day >= ${utcDay(wholeFrom)}`);
    if (from! < wholeFrom) partial.push([sql`e.created_at >= ${iso(span.from!)}`, sql`e.created_at < ${iso(new Date(wholeFrom))}`]);
  }
  if (wholeTo !== undefined) {
    days.push(sql`e.day < ${utcDay(wholeTo)}`);
    if (span.end!.inclusive || end! > wholeTo) partial.push([sql`e.created_at >= ${iso(new Date(wholeTo))}`, ...endCondition]);
  }
  return { days, partial };
}

/**
 * The project's events in the span per `key` (by default the name; an expression over a row
 * aliased `e` with a `name`, as activity/types.ts TYPE_OF_NAME), for the names meeting `names`
 * (also over `e`, as typeCondition); keys with no events are left out.
 */
export async function countBy(db: Db, projectId: string, span: Span, opts: { key?: SQL; names?: SQL } = {}): Promise<Map<string, number>> {
  const { days, partial } = splitSpan(span);
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
