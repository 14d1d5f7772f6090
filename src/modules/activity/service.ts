import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { PREFIXED_ID } from '../../db/ids.ts';
import { countEventsNamed } from '../events/counts.ts';
import { countBy, countInSpan } from '../events/day-counts.ts';
import { type EventRow, pageOfEvents } from '../events/list.ts';
import { type TimeRange, rangeEcho, spanOf, spanOfBounds, spanSql } from '../events/range.ts';
import type { ActivityItem, ActivityQuery } from './schemas.ts';
import { ACTIVITY_TYPES, TYPE_OF_NAME, activityTypeOf, typeCondition } from './types.ts';

const CONTACT_ID = PREFIXED_ID('cnt');

function toItem(r: EventRow): ActivityItem {
  const type = activityTypeOf(r.name);
  const data = r.data ?? {};
  const item: ActivityItem = {
    id: r.id,
    type,
    occurredAt: r.created_at,
    contact: r.contact_id && r.contact_email ? { id: r.contact_id, email: r.contact_email } : null,
    data,
  };
  if (type.startsWith('email.')) {
    if (typeof data.emailId === 'string') item.emailId = data.emailId;
    if (typeof data.subject === 'string') item.subject = data.subject;
  } else if (!type.startsWith('contact.')) {
    item.eventName = r.name;
  }
  return item;
}

export type ActivityFeed = { data: ActivityItem[]; cursor?: string; hasMore: boolean; total: number };

/**
 * GET /activity: sends, deliveries, opens, clicks, bounces, complaints and failures, subscription
 * changes, segment entries/exits and tracked events, newest first. One keyset scan of the events
 * index (project_id, created_at, id), or (contact_id, created_at, id) for one contact, joined to
 * the contact for its email. `total` only on the first page.
 */
export async function activityFeed(db: Db, projectId: string, q: ActivityQuery): Promise<ActivityFeed> {
  const span = spanOfBounds(q);
  const filters: SQL[] = [sql`e.project_id = ${projectId}`, ...spanSql(sql`e.created_at`, span)];
  if (q.contactId !== undefined) filters.push(CONTACT_ID.test(q.contactId) ? sql`e.contact_id = ${q.contactId}` : sql`false`);
  const types = [...new Set(q.types)];
  const ofTypes = types.length > 0 && types.length < ACTIVITY_TYPES.length ? sql`(${sql.join(types.map(typeCondition), sql` OR `)})` : undefined;
  if (ofTypes) filters.push(ofTypes);
  // Without a contact, the total comes from the event counters, whose cost does not grow with the
  // table: all-time ones, or a range's whole days (day-counts.ts). One contact's events are counted.
  const total =
    q.contactId !== undefined
      ? undefined
      : span.from === undefined && span.end === undefined
        ? () => countEventsNamed(db, projectId, ofTypes)
        : () => countInSpan(db, projectId, span, ofTypes);
  return pageOfEvents(db, filters, q.limit, q.cursor, { toItem, total });
}

/** The known types first, in their canonical order, then any other (future `email.*`) alphabetically. */
function orderTypes(types: Iterable<string>): string[] {
  const rank = (t: string) => {
    const i = (ACTIVITY_TYPES as readonly string[]).indexOf(t);
    return i === -1 ? ACTIVITY_TYPES.length : i;
  };
  return [...types].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

export type ActivityStats = { from: string; to: string; total: number; counts: Record<string, number> };

/** Counts per type over the range (day-counts.ts); every known type is present (0 when none). */
export async function activityStats(db: Db, projectId: string, range: TimeRange): Promise<ActivityStats> {
  const counts = new Map<string, number>(ACTIVITY_TYPES.map((t) => [t, 0]));
  let total = 0;
  for (const [type, n] of await countBy(db, projectId, spanOf(range), { key: TYPE_OF_NAME })) {
    counts.set(type, n);
    total += n;
  }
  const ordered = orderTypes(counts.keys()).map((t) => [t, counts.get(t) ?? 0] as const);
  return { ...rangeEcho(range), total, counts: Object.fromEntries(ordered) };
}

/** The last `minutes`, both ends included. */
export const recentSpan = (minutes: number, now: Date) => ({ from: new Date(now.getTime() - minutes * 60_000), end: { at: now, inclusive: true } });

/** Activity in the last `minutes`, both ends included. */
export async function recentCount(db: Db, projectId: string, minutes: number, now: Date): Promise<{ count: number; minutes: number; since: string }> {
  const span = recentSpan(minutes, now);
  const count = await countInSpan(db, projectId, span);
  return { count, minutes, since: span.from.toISOString() };
}

/** The types that occur in the project: those of the names the event counters hold events of (counts.ts). */
export async function activityTypes(db: Db, projectId: string): Promise<{ types: string[] }> {
  const { rows } = await db.execute<{ type: string }>(sql`
    SELECT DISTINCT ${TYPE_OF_NAME} AS type FROM (
      SELECT e.name FROM event_counts AS e WHERE e.project_id = ${projectId} GROUP BY e.name HAVING sum(e.count) > 0
    ) AS e`);
  return { types: orderTypes(rows.map((r) => r.type)) };
}
