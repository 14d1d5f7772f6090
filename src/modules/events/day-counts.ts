import { type SQL, sql } from 'drizzle-orm';
import type { Database, Db } from '../../db/client.ts';
import { sumCounter } from '../../db/counter-rows.ts';
import { type HeavyReads, boundedHeavyReadWhen, heavyReadNote } from '../../http/heavy-reads.ts';
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

/**
 * Counting a span's partial days reads at most this many events at once (a few milliseconds:
 * 1,400,000 took 107–134 ms here); a request whose partial days hold more is a heavy read.
 */
export const EVENTS_COUNTED_AT_ONCE = 100_000;

/** How long one statement of a heavy count of events may run: past it, a 503. */
export const EVENTS_COUNT_STATEMENT_MS = 10_000;

/** What the API description of a request that counts through countingEvents says of it. */
export const HEAVY_EVENT_COUNT = heavyReadNote(
  `When the range's partial UTC days hold more than ${EVENTS_COUNTED_AT_ONCE.toLocaleString('en-US')} events (counted one by one; whole days come from counters)`,
  EVENTS_COUNT_STATEMENT_MS,
);

/** At most how many events counting the span's partial days reads: the events of the UTC days they touch. */
async function partialDayEvents(db: Db, projectId: string, span: Span): Promise<number> {
  const days = new Set<string>();
  for (const p of splitSpan(span, DAY_MS).partial) {
    if (p.from) days.add(utcDate(p.from));
    if (p.end) days.add(utcDate(new Date(p.end.at.getTime() - (p.end.inclusive ? 0 : 1))));
  }
  if (days.size === 0) return 0;
  return sumCounter(db, 'event_day_counts', sql`project_id = ${projectId} AND day = ANY(${sql.param([...days])}::date[])`);
}

/**
 * `work`, which counts the project's events over `span` (countBy, or its own count of the partial
 * days): at once when those days hold at most EVENTS_COUNTED_AT_ONCE events, else as a heavy read
 * (http/heavy-reads.ts: the project's slots and time, a 429 past either; its statements bounded by
 * EVENTS_COUNT_STATEMENT_MS, then a 503). A day of 1,400,000 events, a project tracking at its
 * rate limit, took 110–290 ms a request to count, and twenty such requests at once held the
 * database for every other project (docs/decisions.md § Hardening).
 */
export async function countingEvents<T>(
  ctx: { database: Database; heavyReads: HeavyReads },
  projectId: string,
  span: Span,
  work: (db: Db) => Promise<T>,
): Promise<T> {
  const heavy = (await partialDayEvents(ctx.database.db, projectId, span)) > EVENTS_COUNTED_AT_ONCE;
  return boundedHeavyReadWhen(heavy, ctx, projectId, { ms: EVENTS_COUNT_STATEMENT_MS, what: "Counting this project's events" }, work);
}
