import type { Db } from '../../db/client.ts';
import { clientOf } from '../../db/prepared.ts';
import { prefixedId } from '../../db/ids.ts';
import { eventRollupCtes } from '../analytics/rollups.ts';
import { ENROL_WRITTEN_EVENTS_SQL, enrolmentWaves, workflowEnrolCtes } from '../workflows/engine/enrol.ts';

export type NewEvent = {
  projectId: string;
  contactId: string | null;
  name: string;
  data?: Record<string, unknown> | null;
  createdAt?: Date;
};

/**
 * The event insert as a named statement (planned once per connection): it runs on every tracked
 * event and every email state change. In the same statement, a tracked event is added to the
 * analytics rollups (analytics/rollups.ts) and goes to the workflow engine (EVENT triggers,
 * WAIT_FOR_EVENT: workflows/engine/enrol.ts); every event is added to the event counters by the
 * trigger on `events` (events/counts.ts). $1 is the events as a JSON array (recordEventsValues),
 * no two of them sharing a contact and a name (enrolmentWaves). Exported so the track benchmark
 * issues the very same statement.
 */
export const RECORD_EVENTS_SQL = {
  name: 'herald_events_record_v4',
  text: `WITH input AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS e(id text, project_id text, contact_id text, name text, data jsonb, created_at timestamptz)
    ), inserted AS (
      INSERT INTO events (id, project_id, contact_id, name, data, created_at)
      SELECT id, project_id, contact_id, name, data, created_at FROM input
      RETURNING id, project_id, contact_id, name, data, created_at
    ), ${eventRollupCtes('inserted')}, ${workflowEnrolCtes('inserted')}
    SELECT 1`,
} as const;

export type RecordedEvent = { id: string; projectId: string; contactId: string | null; name: string; createdAt: Date };

/** RECORD_EVENTS_SQL's parameter for these events (a missing key reads as NULL). */
export function recordEventsValues(events: (NewEvent & { id: string; createdAt: Date })[]): [string] {
  return [
    JSON.stringify(
      events.map((e) => ({
        id: e.id,
        project_id: e.projectId,
        contact_id: e.contactId ?? undefined,
        name: e.name,
        data: e.data ?? undefined,
        created_at: e.createdAt.toISOString(),
      })),
    ),
  ];
}

/**
 * The one way an event row is written: tracked events and the events the service emits
 * (contact.subscribed/unsubscribed, email.*, segment.*). Pass the transaction's Drizzle
 * handle so the event commits with the change that caused it. Here and in recordEvents and
 * recordEventsWith, the event counters (events/counts.ts) follow by the trigger on `events`.
 */
export async function recordEvent(db: Db, e: NewEvent): Promise<{ id: string; createdAt: Date }> {
  const [recorded] = await recordEvents(db, [e]);
  return recorded;
}

/**
 * Set-based `recordEvent`: one statement for each wave of events that may enrol together
 * (enrolmentWaves: one, unless two events share a contact and a name), 1,000 events at most.
 */
export async function recordEvents(db: Db, rows: NewEvent[]): Promise<RecordedEvent[]> {
  const now = new Date();
  const withIds = rows.map((e) => ({ ...e, id: prefixedId('evt'), createdAt: e.createdAt ?? now }));
  for (const wave of enrolmentWaves(withIds)) {
    for (let i = 0; i < wave.length; i += 1_000) {
      await clientOf(db).query({ ...RECORD_EVENTS_SQL, values: recordEventsValues(wave.slice(i, i + 1_000)) });
    }
  }
  return withIds.map(({ id, projectId, contactId, name, createdAt }) => ({ id, projectId, contactId, name, createdAt }));
}

/**
 * The statement that records events in the same statement as the change that caused them, so both
 * commit in one round trip: `withCtes` is the text of the statement's CTE list (for example the
 * `UPDATE emails … RETURNING`), `rows` a SELECT over it yielding (ord, project_id, contact_id,
 * name, data, created_at), and both use parameters $1 to $`params` only; the events' ids are the
 * next parameter (recordEventsWith). As constant text, a named statement: the caller's CTEs make it
 * costly to plan, and building its text anew for each group cost the delivery worker's event loop
 * about 35 µs a message (bench/README § campaign, sixteenth session).
 */
export function eventsWithStatement(name: string, q: { withCtes: string; rows: string; params: number }): { name: string; text: string } {
  return {
    name,
    text: `WITH ${q.withCtes}, ids AS (SELECT $${q.params + 1}::text[] AS a),
    src AS (SELECT s.*, row_number() OVER (ORDER BY s.ord) AS n FROM (${q.rows}) AS s),
    inserted AS (
      INSERT INTO events (id, project_id, contact_id, name, data, created_at)
      SELECT ids.a[src.n::int], src.project_id, src.contact_id, src.name, src.data, src.created_at FROM src CROSS JOIN ids
      RETURNING id, project_id, contact_id, name, data, created_at
    ), first_wave AS (
      SELECT * FROM inserted
       WHERE id IN (SELECT DISTINCT ON (src.contact_id, src.name) ids.a[src.n::int] FROM src CROSS JOIN ids ORDER BY src.contact_id, src.name, src.n)
    ), ${eventRollupCtes('inserted')}, ${workflowEnrolCtes('first_wave')}
    SELECT * FROM inserted`,
  };
}

/**
 * Runs an eventsWithStatement with its `values` (the caller's parameters), at most `max` events;
 * ids are made here, in `ord` order. The statement also enrols the first event of each contact
 * and name; a later one of the same pair (two emails to one person in one batch) goes to the
 * workflow engine in a statement of its own after it, on `db`.
 */
export async function recordEventsWith(db: Db, statement: { name: string; text: string }, values: unknown[], max: number): Promise<RecordedEvent[]> {
  const ids = Array.from({ length: max }, () => prefixedId('evt'));
  const { rows } = await clientOf(db).query<{
    id: string;
    project_id: string;
    contact_id: string | null;
    name: string;
    data: Record<string, unknown> | null;
    created_at: string | Date;
  }>({ ...statement, values: [...values, ids] });
  const order = new Map(ids.map((id, i) => [id, i]));
  const recorded = rows
    .map((r) => ({ id: r.id, projectId: r.project_id, contactId: r.contact_id, name: r.name, data: r.data, createdAt: new Date(r.created_at) }))
    .sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  for (const wave of enrolmentWaves(recorded).slice(1)) await clientOf(db).query({ ...ENROL_WRITTEN_EVENTS_SQL, values: recordEventsValues(wave) });
  return recorded.map(({ id, projectId, contactId, name, createdAt }) => ({ id, projectId, contactId, name, createdAt }));
}
