import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { PREFIXED_ID } from '../../db/ids.ts';
import { type EventRow, distinctEventNames, pageOfEvents } from '../events/list.ts';
import { type TimeRange, boundsSql, inRange, rangeEcho } from '../events/range.ts';
import type { ActivityItem, ActivityQuery } from './schemas.ts';
import { ACTIVITY_TYPES, activityTypeOf, typeCondition } from './types.ts';

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
  const filters: SQL[] = [sql`e.project_id = ${projectId}`, ...boundsSql(sql`e.created_at`, q)];
  if (q.contactId !== undefined) filters.push(CONTACT_ID.test(q.contactId) ? sql`e.contact_id = ${q.contactId}` : sql`false`);
  const types = [...new Set(q.types)];
  if (types.length > 0 && types.length < ACTIVITY_TYPES.length) {
    filters.push(sql`(${sql.join(types.map(typeCondition), sql` OR `)})`);
  }
  return pageOfEvents(db, filters, q.limit, q.cursor, { toItem });
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

/** Counts per type over the range; every known type is present (0 when none). */
export async function activityStats(db: Db, projectId: string, range: TimeRange): Promise<ActivityStats> {
  const { rows } = await db.execute<{ name: string; n: number }>(sql`
    SELECT e.name, count(*)::int AS n FROM events AS e
     WHERE e.project_id = ${projectId} AND ${inRange(sql`e.created_at`, range)}
     GROUP BY e.name`);
  const counts = new Map<string, number>(ACTIVITY_TYPES.map((t) => [t, 0]));
  for (const r of rows) {
    const type = activityTypeOf(r.name);
    counts.set(type, (counts.get(type) ?? 0) + r.n);
  }
  const ordered = orderTypes(counts.keys()).map((t) => [t, counts.get(t) ?? 0] as const);
  return { ...rangeEcho(range), total: rows.reduce((n, r) => n + r.n, 0), counts: Object.fromEntries(ordered) };
}

/** Activity in the last `minutes`. */
export async function recentCount(db: Db, projectId: string, minutes: number, now: Date): Promise<{ count: number; minutes: number; since: string }> {
  const since = new Date(now.getTime() - minutes * 60_000);
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM events
     WHERE project_id = ${projectId} AND created_at >= ${since.toISOString()}::timestamptz AND created_at <= ${now.toISOString()}::timestamptz`);
  return { count: rows[0].n, minutes, since: since.toISOString() };
}

/** The types that occur in the project. */
export async function activityTypes(db: Db, projectId: string): Promise<{ types: string[] }> {
  const names = await distinctEventNames(db, projectId);
  return { types: orderTypes(new Set(names.map((n) => activityTypeOf(n.name)))) };
}
