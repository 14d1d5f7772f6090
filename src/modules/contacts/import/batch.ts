import { sql } from 'drizzle-orm';
import type { Db } from '../../../db/client.ts';
import { fieldTypesOf } from '../custom-data.ts';
import { textArray } from '../sql.ts';
import { checkFieldCapacity } from '../field-cap.ts';
import { mergedData, passesDataBound, recordFieldTypesOf } from '../data-sql.ts';

/** One import batch as set-based SQL: hundreds of contacts per statement, never a query per row. */

export type BatchRow = { id: string; email: string; data: Record<string, unknown> };

/**
 * Creates or merges every row in one statement: new contacts are subscribed; an existing contact
 * keeps its subscription and gets the row's values merged over its `data` (top-level keys, like
 * every other path), and is written only when that changes something. The first-seen type of
 * each column is recorded in the same statement. Emails must be distinct within a batch.
 * `firstValues` holds, per column, the first value of the batch (the one that types a new field).
 * A row that would take an existing contact's data past its bound (data-sql.ts) is not written,
 * and its email is returned in `refused`.
 */
export async function upsertBatch(
  db: Db,
  projectId: string,
  rows: BatchRow[],
  firstValues: Record<string, unknown>,
  now: Date,
): Promise<{ imported: number; updated: number; refused: string[] }> {
  const iso = now.toISOString();
  await checkFieldCapacity(db, projectId, fieldTypesOf(firstValues).keys);
  // An import row sets columns and unsets none.
  const merged = mergedData(sql`c.data`, textArray([]), sql`EXCLUDED.data`);
  const { rows: counted } = await db.execute<{ imported: number; updated: number; refused: string[] }>(sql`
    WITH input AS (
      SELECT r.id, r.email, r.data FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(id text, email text, data jsonb)
    ), refused AS (
      SELECT i.email FROM input AS i JOIN contacts AS c ON c.project_id = ${projectId} AND c.email = i.email
       WHERE ${passesDataBound(mergedData(sql`c.data`, textArray([]), sql`i.data`), sql`c.data`)}
    ), up AS (
      INSERT INTO contacts AS c (id, project_id, email, subscribed, data, created_at, updated_at)
      SELECT i.id, ${projectId}, i.email, true, i.data, ${iso}::timestamptz, ${iso}::timestamptz
        FROM input AS i
       WHERE i.email NOT IN (SELECT email FROM refused)
       ORDER BY i.email
      ON CONFLICT (project_id, email) DO UPDATE SET data = ${merged}, updated_at = EXCLUDED.updated_at
       -- Checked again under the row's lock: a write since the snapshot above may have grown it.
       WHERE ${merged} <> c.data AND NOT ${passesDataBound(merged, sql`c.data`)}
      RETURNING c.xmax = 0 AS inserted
    )${recordFieldTypesOf(projectId, firstValues, iso)}
    SELECT count(*) FILTER (WHERE inserted)::int AS imported, count(*) FILTER (WHERE NOT inserted)::int AS updated,
           ARRAY(SELECT email FROM refused ORDER BY email) AS refused
      FROM up`);
  return counted[0];
}
