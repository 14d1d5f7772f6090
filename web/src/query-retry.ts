import { isApiError } from './api.ts';

/**
 * When the dashboard's reads ask again. A 429 means the server is busy with the project's other
 * work of that kind (previews, counts, searches and long lists over its stored data: at most two at once, and a share of the time): it is
 * asked again after the wait the answer names. Any other 4xx will not get better by asking again;
 * a 5xx or a lost connection is asked twice more.
 */
const BUSY_RETRIES = 5;
const OTHER_RETRIES = 2;

export function retryQuery(failures: number, err: unknown): boolean {
  if (isApiError(err, 429)) return failures < BUSY_RETRIES;
  if (isApiError(err) && err.statusCode >= 400 && err.statusCode < 500) return false;
  return failures < OTHER_RETRIES;
}

/** A 429's `details.retryAfter` (seconds; 1 s when it names none, 30 s at most), else TanStack Query's own back-off. */
export function retryDelayMs(failures: number, err: unknown): number {
  if (isApiError(err, 429)) {
    const seconds = err.details?.retryAfter;
    return typeof seconds === 'number' && seconds > 0 ? Math.min(seconds, 30) * 1000 : 1000;
  }
  return Math.min(1000 * 2 ** failures, 30_000);
}
