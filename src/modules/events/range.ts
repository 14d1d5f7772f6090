import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { validationError } from '../../http/errors.ts';

/**
 * `?from=&to=` of the stats endpoints (events and activity). Each is an ISO 8601 date-time with an
 * offset, or a `YYYY-MM-DD` day. `from` is inclusive; `to` is inclusive too, and a day `to` covers
 * that whole day. Defaults: `to` = now, `from` = `to` − 30 days.
 */

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 24 * 3600 * 1000;

const instant = z
  .string()
  .max(40)
  .refine((s) => (DAY.test(s) ? !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) : z.string().datetime({ offset: true }).safeParse(s).success), {
    message: 'Must be an ISO 8601 date-time (2024-05-01T00:00:00Z) or a date (2024-05-01)',
  });

export const rangeQuery = z.object({ from: instant.optional(), to: instant.optional() });

export type TimeRange = {
  from: Date;
  to: Date;
  /** `to` named a whole day: rows before the next midnight count. */
  toDay: boolean;
};

const dayStart = (s: string) => new Date(`${s}T00:00:00Z`);

export function toTimeRange(q: z.output<typeof rangeQuery>, now: Date, defaultDays = 30): TimeRange {
  const toDay = q.to !== undefined && DAY.test(q.to);
  const to = q.to === undefined ? now : toDay ? dayStart(q.to) : new Date(q.to);
  const from = q.from === undefined ? new Date(to.getTime() - defaultDays * DAY_MS) : DAY.test(q.from) ? dayStart(q.from) : new Date(q.from);
  if (from.getTime() > (toDay ? to.getTime() + DAY_MS - 1 : to.getTime())) {
    throw validationError([{ field: 'from', code: 'custom', message: 'from must not be after to' }]);
  }
  return { from, to, toDay };
}

/** `column` within the range, as SQL. */
export function inRange(column: SQL, r: TimeRange): SQL {
  const from = r.from.toISOString();
  if (r.toDay) return sql`${column} >= ${from}::timestamptz AND ${column} < ${new Date(r.to.getTime() + DAY_MS).toISOString()}::timestamptz`;
  return sql`${column} >= ${from}::timestamptz AND ${column} <= ${r.to.toISOString()}::timestamptz`;
}

/** Optional bounds (no defaults), for lists: `from` and/or `to` as SQL conditions on `column`. */
export function boundsSql(column: SQL, q: z.output<typeof rangeQuery>): SQL[] {
  if (q.from === undefined && q.to === undefined) return [];
  const r = toTimeRange({ from: q.from ?? '1970-01-01', to: q.to ?? '9999-12-31' }, new Date());
  const out: SQL[] = [];
  if (q.from !== undefined) out.push(sql`${column} >= ${r.from.toISOString()}::timestamptz`);
  if (q.to !== undefined) {
    out.push(r.toDay ? sql`${column} < ${new Date(r.to.getTime() + DAY_MS).toISOString()}::timestamptz` : sql`${column} <= ${r.to.toISOString()}::timestamptz`);
  }
  return out;
}

/** The range as echoed in responses (a day `to` shown as its last millisecond). */
export function rangeEcho(r: TimeRange): { from: string; to: string } {
  return { from: r.from.toISOString(), to: new Date(r.toDay ? r.to.getTime() + DAY_MS - 1 : r.to.getTime()).toISOString() };
}
