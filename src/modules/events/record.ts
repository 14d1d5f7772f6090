import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { clientOf, executePrepared } from '../../db/prepared.ts';
import { prefixedId } from '../../db/ids.ts';
import { events } from '../../db/schema/events.ts';
import { eventRollupCtes } from '../analytics/rollups.ts';
import { workflowsOnEvent, workflowsOnEvents } from '../workflows/engine/enrol.ts';

export type NewEvent = {
  projectId: string;
  contactId: string | null;
  name: string;
  data?: Record<string, unknown> | null;
  createdAt?: Date;
};

/**
 * The event insert as a named statement (planned once per connection): it runs on every tracked
 * event and every email state change. A tracked event is added to the analytics rollups in the same
 * statement (analytics/rollups.ts); every event is added to the event counters by the trigger on
 * `events` (events/counts.ts). $1 id, $2 project, $3 contact, $4 name, $5 data, $6 time.
 * Exported so the track benchmark issues the very same statement.
 */
export const RECORD_EVENT_SQL = {
  name: 'herald_events_insert_v2',
  text: `WITH inserted AS (
      INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6::timestamptz)
      RETURNING project_id, contact_id, name, created_at
    ), ${eventRollupCtes('inserted')}
    SELECT 1`,
} as const;

/**
 * The one way an event row is written: tracked events and the events the service emits
 * (contact.subscribed/unsubscribed, email.*, segment.*). Pass the transaction's Drizzle
 * handle so the event commits with the change that caused it. Here and in recordEvents and
 * recordEventsWith, the event counters (events/counts.ts) follow by the trigger on `events`.
 */
export async function recordEvent(db: Db, e: NewEvent): Promise<{ id: string; createdAt: Date }> {
  const id = prefixedId('evt');
  const createdAt = e.createdAt ?? new Date();
  const data = e.data == null ? null : JSON.stringify(e.data);
  await clientOf(db).query({ ...RECORD_EVENT_SQL, values: [id, e.projectId, e.contactId, e.name, data, createdAt.toISOString()] });
  // What an event causes in workflows (EVENT triggers, WAIT_FOR_EVENT), in the event's transaction.
  await workflowsOnEvent(db, { id, projectId: e.projectId, contactId: e.contactId, name: e.name, data: e.data ?? null, createdAt });
  return { id, createdAt };
}

export type RecordedEvent = { id: string; projectId: string; contactId: string | null; name: string };

/** Set-based `recordEvent`: many rows in one INSERT (segment entries, bulk subscription changes). */
export async function recordEvents(db: Db, rows: NewEvent[]): Promise<RecordedEvent[]> {
  if (rows.length === 0) return [];
  const now = new Date();
  const values = rows.map((e) => ({
    id: prefixedId('evt'),
    projectId: e.projectId,
    contactId: e.contactId,
    name: e.name,
    data: e.data ?? null,
    createdAt: e.createdAt ?? now,
  }));
  // 6 parameters a row: chunks stay far below PostgreSQL's 65,535 bind parameters.
  // The rollups of tracked events (analytics/rollups.ts) in the same statement.
  for (let i = 0; i < values.length; i += 5_000) {
    const chunk = values
      .slice(i, i + 5_000)
      .map(
        (v) =>
          sql`(${v.id}, ${v.projectId}, ${v.contactId}, ${v.name}, ${v.data == null ? null : JSON.stringify(v.data)}::jsonb, ${v.createdAt.toISOString()}::timestamptz)`,
      );
    await db.execute(sql`
      WITH inserted AS (
        INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ${sql.join(chunk, sql`, `)}
        RETURNING project_id, contact_id, name, created_at
      ), ${sql.raw(eventRollupCtes('inserted'))}
      SELECT 1`);
  }
  await workflowsOnEvents(db, values);
  return values.map(({ id, projectId, contactId, name }) => ({ id, projectId, contactId, name }));
}

/**
 * Set-based, in the same statement as the change that caused the events, so both commit in one
 * round trip: `with` is the statement's CTE list (for example the `UPDATE emails … RETURNING`),
 * `rows` a SELECT over it yielding (ord, project_id, contact_id, name, data, created_at), at most
 * `max` rows; ids are made here, in `ord` order.
 */
export async function recordEventsWith(db: Db, q: { with: SQL; rows: SQL; max: number }): Promise<RecordedEvent[]> {
  const ids = Array.from({ length: q.max }, () => prefixedId('evt'));
  // A named statement: the caller's CTEs make it costly to plan, and it runs for every group of sent emails.
  const { rows } = await executePrepared<{
    id: string;
    project_id: string;
    contact_id: string | null;
    name: string;
    data: Record<string, unknown> | null;
    created_at: string | Date;
  }>(
    db,
    'herald_events_with',
    sql`
    WITH ${q.with}, src AS (SELECT s.*, row_number() OVER (ORDER BY s.ord) AS n FROM (${q.rows}) AS s),
    inserted AS (
      INSERT INTO events (id, project_id, contact_id, name, data, created_at)
      SELECT (${sql.param(ids)}::text[])[src.n::int], src.project_id, src.contact_id, src.name, src.data, src.created_at FROM src
      RETURNING id, project_id, contact_id, name, data, created_at
    ), ${sql.raw(eventRollupCtes('inserted'))}
    SELECT * FROM inserted`,
  );
  await workflowsOnEvents(
    db,
    rows.map((r) => ({ id: r.id, projectId: r.project_id, contactId: r.contact_id, name: r.name, data: r.data, createdAt: new Date(r.created_at) })),
  );
  return rows.map((r) => ({ id: r.id, projectId: r.project_id, contactId: r.contact_id, name: r.name }));
}
