import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { fieldUsageProviders } from '../contacts/fields.ts';
import { afterTrackListeners } from '../events/service.ts';
import { eventUsageProviders } from '../events/usage.ts';
import { scheduleSegmentReevaluation } from './membership.ts';

/**
 * What segments register with other modules, once, when the segments module is loaded: their
 * references to fields and event names (usage endpoints, and the 409 on deleting a used one), and
 * the re-evaluation of tracked segments after every tracked event.
 */

/** Segments with a filter whose field is `field`, or (for `data.*`) a field nested under it. */
async function segmentsUsingField(db: Db, projectId: string, field: string, nested: boolean): Promise<{ id: string; name: string }[]> {
  const path = nested ? 'strict $.**.field ? (@ == $f || @ starts with $p)' : 'strict $.**.field ? (@ == $f)';
  const { rows } = await db.execute<{ id: string; name: string }>(sql`
    SELECT id, name FROM segments
     WHERE project_id = ${projectId} AND condition IS NOT NULL
       AND jsonb_path_exists(condition, ${path}::jsonpath, jsonb_build_object('f', ${field}::text, 'p', ${`${field}.`}::text))
     ORDER BY created_at, id`);
  return rows;
}

fieldUsageProviders.push(async (db, projectId, field) => ({
  segments: await segmentsUsingField(db, projectId, field, field.startsWith('data.')),
}));

eventUsageProviders.push(async (db, projectId, eventName) => ({
  segments: await segmentsUsingField(db, projectId, `event.${eventName}`, false),
}));

afterTrackListeners.push((ctx, t, event) => scheduleSegmentReevaluation(ctx, event.projectId, event.contact.id, t.client));
