import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';

/** What segments reference (fields, event names, other segments), for the usage module (src/modules/usage). */

/** Segments with a filter whose field is `field`, or (for `data.*`) a field nested under it. */
export async function segmentsUsingField(db: Db, projectId: string, field: string, nested: boolean): Promise<{ id: string; name: string }[]> {
  const path = nested ? 'strict $.**.field ? (@ == $f || @ starts with $p)' : 'strict $.**.field ? (@ == $f)';
  const { rows } = await db.execute<{ id: string; name: string }>(sql`
    SELECT id, name FROM segments
     WHERE project_id = ${projectId} AND condition IS NOT NULL
       AND jsonb_path_exists(condition, ${path}::jsonpath, jsonb_build_object('f', ${field}::text, 'p', ${`${field}.`}::text))
     ORDER BY created_at, id`);
  return rows;
}

/** Other segments whose condition references this one (`segment.<id>`). */
export async function segmentsReferencing(db: Db, projectId: string, segmentId: string): Promise<{ id: string; name: string }[]> {
  const { rows } = await db.execute<{ id: string; name: string }>(sql`
    SELECT id, name FROM segments
     WHERE project_id = ${projectId} AND condition IS NOT NULL AND id <> ${segmentId}::uuid
       AND jsonb_path_exists(condition, 'strict $.**.field ? (@ == $f)', jsonb_build_object('f', ${`segment.${segmentId}`}::text))
     ORDER BY created_at, id`);
  return rows;
}
