import { type SQL, sql } from 'drizzle-orm';

/**
 * The buckets of an analytics series, in the project's time zone. An hour is an absolute hour: the
 * local hour an instant falls in, as an instant (`date_trunc('hour', at, tz)` keeps the instant's
 * own UTC offset below a day), so at a DST change each hour is its own bucket, once: none is
 * repeated when the clocks go forward, none merged with the next when they go back. A zone a
 * quarter or half hour off UTC keeps its hours at :15, :30 or :45 UTC. Days and weeks are local
 * calendar dates (a local timestamp), so a day of 23 or 25 hours is one bucket.
 */

/** The bucket of the timestamptz `at`: a timestamptz for hours, a local timestamp otherwise. */
export const bucketOf = (interval: string, at: SQL, tz: string): SQL =>
  interval === 'hour' ? sql`date_trunc('hour', ${at}, ${tz})` : sql`date_trunc(${interval}, ${at} AT TIME ZONE ${tz})`;

/** Every bucket from the one of `from` to the one of `to` (timestamptz texts), as column `b`; an hour added to an instant is 3,600 s. */
export const bucketSeries = (interval: string, from: string, to: string, tz: string): SQL =>
  sql`SELECT generate_series(${bucketOf(interval, sql`${from}::timestamptz`, tz)}, ${bucketOf(interval, sql`${to}::timestamptz`, tz)}, ('1 ' || ${interval})::interval) AS b`;

/** A bucket's start as a UTC ISO text (for a local date, the instant its local midnight was). */
export const bucketStartText = (interval: string, b: SQL, tz: string): SQL => {
  const at = interval === 'hour' ? b : sql`(${b} AT TIME ZONE ${tz})`;
  return sql`to_char(${at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;
};
