import { sql } from 'drizzle-orm';
import type { Db } from '../../../db/client.ts';
import { fieldTypesOf } from '../custom-data.ts';
import { textArray } from '../sql.ts';
import { checkFieldCapacity } from '../field-cap.ts';
import { mergedData, recordFieldTypesOf } from '../data-sql.ts';

/** One import batch as set-based SQL: hundreds of contacts per statement, never a query per row. */

export type BatchRow = { id: string; email: string; data: Record<string, unknown> };

/**
 * Creates or merges every row in one statement: new contacts are subscribed; an existing contact
 * keeps its subscription and gets the row's values merged over its `data` (top-level keys, like
 * every other path), and is written only when that changes something. The first-seen type of
 * each column is recorded in the same statement. Emails must be distinct within a batch.
 * `firstValues` holds, per column, the first value of the batch (the one that types a new field).
 */
export async function upsertBatch(
  db: Db,
  projectId: string,
  rows: BatchRow[],
  firstValues: Record<string, unknown>,
  now: Date,
): Promise<{ imported: number; updated: number }> {
  const iso = now.toISOString();
  await checkFieldCapacity(db, projectId, fieldTypesOf(firstValues).keys);
  // An import row sets columns and unsets none.
  const merged = mergedData(sql`c.data`, textArray([]), sql`EXCLUDED.data`);
  const { rows: counted } = await db.execute<{ imported: number; updated: number }>(sql`
    WITH input AS (
      SELECT r.id, r.email, r.data FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(id text, email text, data jsonb)
    ), up AS (
      INSERT INTO contacts AS c (id, project_id, email, subscribed, data, created_at, updated_at)
      SELECT i.id, ${projectId}, i.email, true, i.data, ${iso}::timestamptz, ${iso}::timestamptz
        FROM input AS i
       ORDER BY i.email
      ON CONFLICT (project_id, email) DO UPDATE SET data = ${merged}, updated_at = EXCLUDED.updated_at
       WHERE ${merged} <> c.data
      RETURNING c.xmax = 0 AS inserted
    )${recordFieldTypesOf(projectId, firstValues, iso)}
    SELECT count(*) FILTER (WHERE inserted)::int AS imported, count(*) FILTER (WHERE NOT inserted)::int AS updated FROM up`);
  return counted[0];
}
