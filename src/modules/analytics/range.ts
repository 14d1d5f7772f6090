import type { z } from 'zod';
import { badRequest } from '../../http/errors.ts';
import { type TimeRange, rangeQuery, rangeEcho, toTimeRange } from '../events/range.ts';

/** Analytics ranges: `from`/`to` as for the stats endpoints (default the last 30 days), at most 366 days. */

const DAY_MS = 86_400_000;
export const MAX_RANGE_DAYS = 366;
/** Hourly buckets are for short ranges: at most 31 days (744 points). */
export const MAX_HOURLY_DAYS = 31;

export function analyticsRange(q: z.output<typeof rangeQuery>, now: Date, interval?: 'hour' | 'day' | 'week'): TimeRange {
  const r = toTimeRange(q, now);
  const echo = rangeEcho(r);
  const days = (Date.parse(echo.to) - Date.parse(echo.from)) / DAY_MS;
  if (days > MAX_RANGE_DAYS)
    throw badRequest(`The range is ${Math.ceil(days)} days; at most ${MAX_RANGE_DAYS} days are allowed`, { from: echo.from, to: echo.to });
  if (interval === 'hour' && days > MAX_HOURLY_DAYS) {
    throw badRequest(`interval=hour covers at most ${MAX_HOURLY_DAYS} days; use day or week for longer ranges`, { from: echo.from, to: echo.to });
  }
  return r;
}
