import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import type { ContactRecord } from './schemas.ts';
import { type ContactRow, contactColumns, textArray, toContactRecord } from './sql.ts';

/** Several contacts of a project in one query (workers load a batch's recipients at once). */
export async function getContactsByIds(db: Db, projectId: string, ids: string[]): Promise<Map<string, ContactRecord>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.execute<ContactRow>(
    sql`SELECT ${contactColumns('c')} FROM contacts c WHERE c.project_id = ${projectId} AND c.id = ANY(${textArray(ids)})`,
  );
  return new Map(rows.map((r) => [r.id, toContactRecord(r)]));
}
