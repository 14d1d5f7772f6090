import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { validationError } from '../../http/errors.ts';

/**
 * `?from=&to=` of the stats endpoints (events and activity). Each is an ISO 8601 date-time with an
 * offset, or a `YYYY-MM-DD` day. `from` is inclusive; `to` is inclusive too, and a day `to` covers
 * that whole day. Defaults: `to` = now, `from` = `to` − 30 days.
 */

const DAY = /^\d{4}-\d{2}-\d{2}$/;
export const DAY_MS = 24 * 3600 * 1000;

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

/** A range whose ends may be open: `from` inclusive; `end` inclusive or not (a day `to` ends before the next midnight). */
export type Span = { from?: Date; end?: { at: Date; inclusive: boolean } };

export const spanOf = (r: TimeRange): Span => ({
  from: r.from,
  end: r.toDay ? { at: new Date(r.to.getTime() + DAY_MS), inclusive: false } : { at: r.to, inclusive: true },
});

/** Optional bounds (no defaults), for lists: the ends of `?from=&to=` that were given. */
export function spanOfBounds(q: z.output<typeof rangeQuery>): Span {
  if (q.from === undefined && q.to === undefined) return {};
  const r = spanOf(toTimeRange({ from: q.from ?? '1970-01-01', to: q.to ?? '9999-12-31' }, new Date()));
  return { from: q.from === undefined ? undefined : r.from, end: q.to === undefined ? undefined : r.end };
}

const iso = (d: Date) => sql`${d.toISOString()}::timestamptz`;

/** `column` within the span: a condition per end given. */
export function spanSql(column: SQL, span: Span): SQL[] {
  const out: SQL[] = [];
  if (span.from) out.push(sql`${column} >= ${iso(span.from)}`);
  if (span.end) out.push(span.end.inclusive ? sql`${column} <= ${iso(span.end.at)}` : sql`${column} < ${iso(span.end.at)}`);
  return out;
}

/**
 * The span cut at multiples of `unitMs` since the epoch (UTC days, quarter hours): the whole units
 * inside it, [from, to) with either end open as the span's, for a summary kept per unit; and the
 * partial spans at its ends, to be read from the rows themselves. A unit is whole only when the
 * span covers all of it: an inclusive end on a boundary leaves that instant as a partial span.
 * `whole` is null when no unit fits.
 */
export function splitSpan(span: Span, unitMs: number): { whole: { from?: Date; to?: Date } | null; partial: Span[] } {
  const from = span.from?.getTime();
  const end = span.end?.at.getTime();
  const wholeFrom = from === undefined ? undefined : Math.ceil(from / unitMs) * unitMs;
  const wholeTo = end === undefined ? undefined : Math.floor(end / unitMs) * unitMs;
  if (wholeFrom !== undefined && wholeTo !== undefined && wholeFrom >= wholeTo) return { whole: null, partial: [span] };
  const partial: Span[] = [];
  if (wholeFrom !== undefined && from! < wholeFrom) partial.push({ from: span.from, end: { at: new Date(wholeFrom), inclusive: false } });
  if (wholeTo !== undefined && (span.end!.inclusive || end! > wholeTo)) partial.push({ from: new Date(wholeTo), end: span.end });
  return {
    whole: { from: wholeFrom === undefined ? undefined : new Date(wholeFrom), to: wholeTo === undefined ? undefined : new Date(wholeTo) },
    partial,
  };
}

/** A UTC day as `YYYY-MM-DD`. */
export const utcDate = (d: Date): string => d.toISOString().slice(0, 10);

/** `column` within the range, as SQL. */
export const inRange = (column: SQL, r: TimeRange): SQL => sql.join(spanSql(column, spanOf(r)), sql` AND `);

/** The range as echoed in responses (a day `to` shown as its last millisecond). */
export function rangeEcho(r: TimeRange): { from: string; to: string } {
  return { from: r.from.toISOString(), to: new Date(r.toDay ? r.to.getTime() + DAY_MS - 1 : r.to.getTime()).toISOString() };
}
