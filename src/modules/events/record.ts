import type pg from 'pg';
import type { Db } from '../../db/client.ts';
import { prefixedId } from '../../db/ids.ts';
import { events } from '../../db/schema/events.ts';

export type NewEvent = {
  projectId: string;
  contactId: string | null;
  name: string;
  data?: Record<string, unknown> | null;
  createdAt?: Date;
};

/**
 * The event insert as a named statement (planned once per connection): it runs on every tracked
 * event and every email state change. $1 id, $2 project, $3 contact, $4 name, $5 data, $6 time.
 * Exported so the track benchmark issues the very same statement.
 */
export const RECORD_EVENT_SQL = {
  name: 'herald_events_insert_v1',
  text: 'INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6::timestamptz)',
} as const;

/**
 * The one way an event row is written: tracked events and the events the service emits
 * (contact.subscribed/unsubscribed, email.*, segment.*). Pass the transaction's Drizzle
 * handle so the event commits with the change that caused it.
 */
export async function recordEvent(db: Db, e: NewEvent): Promise<{ id: string; createdAt: Date }> {
  const id = prefixedId('evt');
  const createdAt = e.createdAt ?? new Date();
  const client = (db as Db & { $client?: pg.Pool | pg.PoolClient }).$client;
  if (client) {
    const data = e.data == null ? null : JSON.stringify(e.data);
    await client.query({ ...RECORD_EVENT_SQL, values: [id, e.projectId, e.contactId, e.name, data, createdAt.toISOString()] });
  } else {
    await db.insert(events).values({ id, projectId: e.projectId, contactId: e.contactId, name: e.name, data: e.data ?? null, createdAt });
  }
  return { id, createdAt };
}
