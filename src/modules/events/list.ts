import { type SQL, sql } from 'drizzle-orm';
import type { Database, Db } from '../../db/client.ts';
import { PREFIXED_ID } from '../../db/ids.ts';
import { budgetedPage, dataWithinBudget } from '../../db/page-budget.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { answerTimeout, withStatementTimeout } from '../../db/statement-timeout.ts';
import { badRequest, validationError } from '../../http/errors.ts';
import { hasMoreThan } from '../../db/more-than.ts';
import { type HeavyReads, boundedHeavyReadWhen, heavyReadNote } from '../../http/heavy-reads.ts';
import { getContact } from '../contacts/service.ts';
import { countEvents } from './counts.ts';
import { isoMs, isoUs } from '../contacts/sql.ts';
import { isReservedEventName } from './names.ts';
import { type TimeRange, inRange, rangeEcho } from './range.ts';
import type { EventRecord, ListEventsQuery } from './schemas.ts';

/** GET /events, GET /events/contact/:contactId, GET /events/names, GET /events/stats. */

/** A contact's events up to this many are listed and counted at once; past it, their list is a heavy read. */
export const CONTACT_EVENTS_AT_ONCE = 10_000;

const EVENT_ID = PREFIXED_ID('evt');
const CONTACT_ID = PREFIXED_ID('cnt');
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export type EventList = { data: EventRecord[]; cursor?: string; hasMore: boolean; total: number };

/** A keyset position on (created_at, id), validated so that no malformed value reaches SQL. */
export function timeCursor(cursor: string, idPattern: RegExp = EVENT_ID): { at: string; id: string } {
  const { sortValue, id } = decodeCursor(cursor);
  if (typeof sortValue !== 'string' || !CURSOR_TIME.test(sortValue) || Number.isNaN(Date.parse(sortValue)) || !idPattern.test(id)) {
    throw badRequest('Invalid cursor', { cursor });
  }
  return { at: sortValue, id };
}

export type EventRow = {
  id: string;
  name: string;
  contact_id: string | null;
  contact_email: string | null;
  data: Record<string, unknown> | null;
  created_at: string;
  sort_value: string;
};

const toEventRecord = (r: EventRow): EventRecord => ({
  id: r.id,
  name: r.name,
  contactId: r.contact_id,
  contactEmail: r.contact_email,
  data: r.data ?? {},
  createdAt: r.created_at,
});

export type PageOptions<T> = {
  toItem?: (row: EventRow) => T;
  /** The first page's `total`; by default the events matching the filters are counted. */
  total?: () => Promise<number>;
};

/**
 * Newest first, keyset-paginated on (created_at, id) with the index that matches the filter:
 * (project_id, created_at, id), (project_id, name, created_at) or (contact_id, created_at, id).
 * `total` only on the first page. A page ends early, with `hasMore`, once it holds
 * PAGE_DATA_BUDGET bytes of data (db/page-budget.ts).
 */
export async function pageOfEvents<T = EventRecord>(
  db: Db,
  filters: SQL[],
  limit: number,
  cursor: string | undefined,
  options: PageOptions<T> = {},
): Promise<{ data: T[]; cursor?: string; hasMore: boolean; total: number }> {
  const toItem = options.toItem ?? (toEventRecord as (row: EventRow) => T);
  const where = sql.join(filters, sql` AND `);
  const after = cursor ? timeCursor(cursor) : null;
  const keyset = after ? sql` AND (e.created_at, e.id) < (${after.at}::timestamptz, ${after.id})` : sql``;
  // An event's data (at most 256 KB) is measured as the page is read: at most 101 of them.
  const order = sql`e.created_at DESC, e.id DESC`;
  const page = db.execute<EventRow & { in_page: boolean }>(sql`
    SELECT e.id, e.name, e.contact_id, c.email AS contact_email, ${dataWithinBudget(sql`e.data`, sql`s.bytes`, order)},
           ${isoMs('e.created_at')} AS created_at, ${isoUs('e.created_at')} AS sort_value
      FROM events AS e LEFT JOIN contacts AS c ON c.id = e.contact_id
           CROSS JOIN LATERAL (SELECT coalesce(octet_length(e.data::text), 0) AS bytes OFFSET 0) AS s
     WHERE ${where}${keyset}
     ORDER BY ${order}
     LIMIT ${limit + 1}`);
  const countRows = async () => (await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM events AS e WHERE ${where}`)).rows[0].n;
  const [{ rows }, total] = await Promise.all([page, after ? 0 : (options.total ?? countRows)()]);
  const { items, hasMore } = budgetedPage(rows, limit);
  const list: { data: T[]; cursor?: string; hasMore: boolean; total: number } = { data: items.map(toItem), hasMore, total };
  const last = items.at(-1);
  if (hasMore && last) list.cursor = encodeCursor(last.sort_value, last.id);
  return list;
}

/**
 * The project's events. Without a contact filter `total` comes from the event counters (counts.ts),
 * whose cost does not grow with the table; a contact's events are counted (readingContactEvents).
 */
export async function listEvents(db: Db, projectId: string, q: ListEventsQuery): Promise<EventList> {
  const filters: SQL[] = [sql`e.project_id = ${projectId}`];
  if (q.name !== undefined) filters.push(sql`e.name = ${q.name}`);
  if (q.contactId !== undefined) {
    filters.push(CONTACT_ID.test(q.contactId) ? sql`e.contact_id = ${q.contactId}` : sql`false`);
    return pageOfEvents(db, filters, q.limit, q.cursor);
  }
  return pageOfEvents(db, filters, q.limit, q.cursor, { total: () => countEvents(db, projectId, q.name) });
}

/** Every event of one contact (404 CONTACT_NOT_FOUND for an unknown or foreign contact). */
export async function listContactEvents(
  db: Db,
  projectId: string,
  contactId: string,
  q: { limit: number; cursor?: string; name?: string },
): Promise<EventList> {
  await getContact(db, projectId, contactId);
  const filters: SQL[] = [sql`e.contact_id = ${contactId}`, sql`e.project_id = ${projectId}`];
  if (q.name !== undefined) filters.push(sql`e.name = ${q.name}`);
  return pageOfEvents(db, filters, q.limit, q.cursor);
}

export type EventName = { name: string; reserved: boolean; lastSeenAt: string };

/**
 * Distinct names by a loose index scan on (project_id, name, created_at): one index probe per
 * distinct name, however many events there are. Sorted by name; at most `limit` of them (the scan
 * stops there: 200,000 names took 4 s and answered 65 MB).
 */
export async function distinctEventNames(db: Db, projectId: string, limit: number): Promise<EventName[]> {
  const { rows } = await db.execute<{ name: string; last_seen_at: string }>(sql`
    WITH RECURSIVE n(name, i) AS (
      (SELECT name, 1 FROM events WHERE project_id = ${projectId} ORDER BY name LIMIT 1)
      UNION ALL
      SELECT (SELECT e.name FROM events AS e WHERE e.project_id = ${projectId} AND e.name > n.name ORDER BY e.name LIMIT 1), n.i + 1
        FROM n WHERE n.name IS NOT NULL AND n.i < ${limit}::bigint
    )
    SELECT n.name, ${isoMs('l.created_at')} AS last_seen_at
      FROM n CROSS JOIN LATERAL (
        SELECT created_at FROM events AS e WHERE e.project_id = ${projectId} AND e.name = n.name ORDER BY created_at DESC LIMIT 1
      ) AS l
     WHERE n.name IS NOT NULL
     ORDER BY n.name`);
  return rows.map((r) => ({ name: r.name, reserved: isReservedEventName(r.name), lastSeenAt: r.last_seen_at }));
}

export type EventStats = {
  from: string;
  to: string;
  total: number;
  events: { name: string; count: number; uniqueContacts: number }[];
};

/** Names listed by GET /events/names and /events/stats at most (the most frequent, for stats). */
export const MAX_LISTED_EVENT_NAMES = 1_000;

/**
 * How long PostgreSQL may count one range for GET /events/stats. A year of 5M events takes it
 * about 1.2 s; the cost grows with the range's events, and a request past this bound is a 422
 * asking for a shorter range instead of a connection held for minutes.
 */
export const EVENT_STATS_STATEMENT_MS = 10_000;

/** What the API description of a list of one contact's events says of readingContactEvents. */
export const HEAVY_CONTACT_EVENTS = heavyReadNote(
  `When the contact has more than ${CONTACT_EVENTS_AT_ONCE.toLocaleString('en-US')} events`,
  EVENT_STATS_STATEMENT_MS,
);

/**
 * Counts per name over the range, most frequent first: the first MAX_LISTED_EVENT_NAMES names;
 * `total` counts every event. The events are grouped by (name, contact) first and the groups
 * counted: a hash aggregate, where `count(DISTINCT contact_id)` sorted every event of the range
 * (5M events over a year: 1.2 s instead of 7.0 s). A contact's events must be read, so the cost
 * still grows with the range: bounded by EVENT_STATS_STATEMENT_MS (and, in the route, by a
 * heavy-read slot: http/heavy-reads.ts).
 */
export async function eventStats(database: Database, projectId: string, range: TimeRange): Promise<EventStats> {
  return answerTimeout(
    () => withStatementTimeout(database, EVENT_STATS_STATEMENT_MS, (db) => countRange(db, projectId, range)),
    () =>
      validationError([
        {
          field: 'from',
          code: 'range_too_large',
          message: `Counting this range's events took longer than ${EVENT_STATS_STATEMENT_MS / 1000} s: ask for a shorter range (from, to)`,
        },
      ]),
  );
}

async function countRange(db: Db, projectId: string, range: TimeRange): Promise<EventStats> {
  const { rows } = await db.execute<{ name: string; count: number; contacts: number; total: string }>(sql`
    WITH pairs AS (
      SELECT e.name, e.contact_id, count(*) AS n FROM events AS e
       WHERE e.project_id = ${projectId} AND ${inRange(sql`e.created_at`, range)}
       GROUP BY e.name, e.contact_id
    )
    SELECT p.name, sum(p.n)::int AS count, count(p.contact_id)::int AS contacts, sum(sum(p.n)) OVER () AS total
      FROM pairs AS p
     GROUP BY p.name
     ORDER BY count DESC, p.name
     LIMIT ${MAX_LISTED_EVENT_NAMES}`);
  return {
    ...rangeEcho(range),
    total: Number(rows[0]?.total ?? 0),
    events: rows.map((r) => ({ name: r.name, count: r.count, uniqueContacts: r.contacts })),
  };
}

/**
 * `work`, which lists one contact's events (GET /events?contactId=, GET /events/contact/:id,
 * GET /activity?contactId=) and counts them for `total`: at once when the contact has at most
 * CONTACT_EVENTS_AT_ONCE events, else as a heavy read (http/heavy-reads.ts: the project's slots
 * and time, a 429 past either; its statements bounded by EVENT_STATS_STATEMENT_MS, then a 503).
 * A contact tracked at the project's rate limit for a day has 1,440,000 events, and counting
 * them took 110–130 ms a request. Whether it has more is read from at most that many entries of
 * the contact's index, in the index's order, so that the planner reads the index rather than the
 * table (emails/service.ts says what a sequential scan with a LIMIT did there).
 */
export async function readingContactEvents<T>(
  ctx: { database: Database; heavyReads: HeavyReads },
  projectId: string,
  contactId: string,
  work: (db: Db) => Promise<T>,
): Promise<T> {
  const db = ctx.database.db;
  const many =
    CONTACT_ID.test(contactId) &&
    (await hasMoreThan(
      db,
      sql`SELECT 1 FROM events AS e WHERE e.contact_id = ${contactId} AND e.project_id = ${projectId} ORDER BY e.created_at DESC, e.id DESC`,
      CONTACT_EVENTS_AT_ONCE,
    ));
  return boundedHeavyReadWhen(many, ctx, projectId, { ms: EVENT_STATS_STATEMENT_MS, what: "Listing this contact's events" }, work);
}
