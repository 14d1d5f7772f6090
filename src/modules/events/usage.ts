import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { badRequest, conflict } from '../../http/errors.ts';
import { isReservedEventName } from './names.ts';

/** GET /events/:eventName/usage and DELETE /events/:eventName. */

export type EventUsageRef = { id: string; name: string };
export type EventUsage = { segments: EventUsageRef[]; workflows: EventUsageRef[] };

/**
 * Modules that reference event names (segment filters on `event.<name>`, workflow EVENT triggers,
 * WAIT_FOR_EVENT steps and conditions) register a provider here, one import and one entry. Each
 * returns its references to the name; a name with any reference cannot be deleted (409).
 */
export type EventUsageProvider = (db: Db, projectId: string, eventName: string) => Promise<Partial<EventUsage>>;

export const eventUsageProviders: EventUsageProvider[] = [];

async function usageOf(db: Db, projectId: string, eventName: string): Promise<EventUsage> {
  const usage: EventUsage = { segments: [], workflows: [] };
  for (const part of await Promise.all(eventUsageProviders.map((p) => p(db, projectId, eventName)))) {
    usage.segments.push(...(part.segments ?? []));
    usage.workflows.push(...(part.workflows ?? []));
  }
  return usage;
}

const inUse = (u: EventUsage) => u.segments.length + u.workflows.length > 0;

export async function eventUsage(
  db: Db,
  projectId: string,
  eventName: string,
): Promise<EventUsage & { eventCount: number; canDelete: boolean }> {
  const [usage, counted] = await Promise.all([
    usageOf(db, projectId, eventName),
    db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM events WHERE project_id = ${projectId} AND name = ${eventName}`),
  ]);
  return { ...usage, eventCount: counted.rows[0].n, canDelete: !isReservedEventName(eventName) && !inUse(usage) };
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
    const usage = await usageOf(tx, projectId, eventName);
    if (inUse(usage)) throw conflict(`Event '${eventName}' is in use and cannot be deleted`, { eventName, ...usage });
    const { rowCount } = await tx.execute(sql`DELETE FROM events WHERE project_id = ${projectId} AND name = ${eventName}`);
    return { deleted: rowCount ?? 0 };
  });
}
