import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { badRequest, conflict } from '../../http/errors.ts';
import { type EventNameUsers, usage } from '../usage/service.ts';
import { countEvents } from './counts.ts';
import { isReservedEventName } from './names.ts';
import { forgetEventName } from '../analytics/rollups.ts';

/** GET /events/:eventName/usage and DELETE /events/:eventName. */

export type EventUsage = EventNameUsers;

const inUse = (u: EventUsage) => u.segments.length + u.workflows.length > 0;

export async function eventUsage(db: Db, projectId: string, eventName: string): Promise<EventUsage & { eventCount: number; canDelete: boolean }> {
  const [users, counted] = await Promise.all([usage.eventNameUsers(db, projectId, eventName), countEvents(db, projectId, eventName)]);
  return { ...users, eventCount: counted, canDelete: !isReservedEventName(eventName) && !inUse(users) };
}

/**
 * Deletes every event with the name: 400 for a name the service emits, 409 while a segment or
 * workflow references it. Deleting a name nothing was tracked under is not an error.
 */
export async function deleteEventName(ctx: AppContext, projectId: string, eventName: string): Promise<{ deleted: number }> {
  if (isReservedEventName(eventName)) {
    throw badRequest(`'${eventName}' is emitted by the service and cannot be deleted`, { eventName });
  }
  return withTransaction(ctx.database, async ({ tx }) => {
    const users = await usage.eventNameUsers(tx, projectId, eventName);
    if (inUse(users)) throw conflict(`Event '${eventName}' is in use and cannot be deleted`, { eventName, ...users });
    // The event counters follow by trigger (counts.ts).
    const { rowCount } = await tx.execute(sql`DELETE FROM events WHERE project_id = ${projectId} AND name = ${eventName}`);
    await forgetEventName(tx, projectId, eventName);
    return { deleted: rowCount ?? 0 };
  });
}
