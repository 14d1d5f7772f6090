/**
 * Dates in the project's time zone, where the server buckets analytics: a day bucket starts at the
 * project's local midnight, which the browser's own zone may put on the day before.
 */

/** The zone's offset from UTC at `at`, in ms (positive east of UTC). */
function offsetMs(at: number, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  }).formatToParts(at);
  const n = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second')) - Math.floor(at / 1000) * 1000;
}

/**
 * The instant the project's day began `days - 1` days before today's: the range of the last `days`
 * days, today included, so a series of daily buckets has `days` points (a range of `days` × 24
 * hours ending now touches `days + 1` calendar days).
 */
export function startOfLastDays(now: Date, days: number, timeZone: string): Date {
  const local = new Date(now.getTime() + offsetMs(now.getTime(), timeZone));
  const midnight = Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate() - (days - 1));
  // The offset at that midnight (it may differ from now's across a DST change), checked once more.
  const guess = midnight - offsetMs(midnight, timeZone);
  return new Date(midnight - offsetMs(guess, timeZone));
}

/** A bucket's label in the project's zone: its date, or for hourly buckets its date and hour. */
export function bucketLabel(iso: string, interval: 'hour' | 'day' | 'week', timeZone: string): string {
  const at = new Date(iso);
  if (interval === 'hour') return at.toLocaleString(undefined, { timeZone, month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });
  return at.toLocaleDateString(undefined, { timeZone });
}
