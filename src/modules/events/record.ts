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
 * The one way an event row is written: tracked events and the events the service emits
 * (contact.subscribed/unsubscribed, email.*, segment.*). Pass the transaction's Drizzle
 * handle so the event commits with the change that caused it.
 */
export async function recordEvent(db: Db, e: NewEvent): Promise<{ id: string; createdAt: Date }> {
  const id = prefixedId('evt');
  const createdAt = e.createdAt ?? new Date();
  await db.insert(events).values({ id, projectId: e.projectId, contactId: e.contactId, name: e.name, data: e.data ?? null, createdAt });
  return { id, createdAt };
}
