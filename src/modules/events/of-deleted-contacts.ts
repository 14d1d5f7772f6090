import { sql } from 'drizzle-orm';
import type { Database, Db } from '../../db/client.ts';
import { runBatch } from '../../db/batches.ts';
import { textArray } from '../contacts/sql.ts';
import { forgetDeletedEvents } from '../analytics/rollups.ts';

/**
 * Events have no foreign keys (migration 0025), so a contact's events do not go by cascade: every
 * delete of contacts calls this right after, in its transaction. It deletes their events (and their
 * part of the analytics day counts; the event counters follow by trigger, events/counts.ts) and
 * remembers the contacts in `deleted_contacts`.
 *
 * In a statement of its own after the contacts' DELETE: under READ COMMITTED a statement sees what
 * committed before it began, and the DELETE waited for the transactions that held the contact's row
 * or its emails' rows, which is where most events are written (a track's upsert, an email's status).
 * An event written without such a lock (a transient bounce's, one from an email row read earlier)
 * can still commit just after; storage maintenance deletes the events of each remembered contact
 * once more when it is DELETED_CONTACTS_SWEPT_AFTER_MS old (sweepDeletedContacts).
 */
export async function deleteEventsOfDeletedContacts(tx: Db, projectId: string, contactIds: string[], now: Date): Promise<void> {
  if (contactIds.length === 0) return;
  await tx.execute(sql`
    WITH remembered AS (
      INSERT INTO deleted_contacts (contact_id, project_id, deleted_at)
      SELECT id, ${projectId}, ${now.toISOString()}::timestamptz FROM unnest(${textArray(contactIds)}) AS id
      ON CONFLICT (contact_id) DO UPDATE SET deleted_at = excluded.deleted_at
    ), deleted AS (
      DELETE FROM events AS e WHERE e.project_id = ${projectId} AND e.contact_id = ANY(${textArray(contactIds)})
      RETURNING e.project_id, e.name, e.created_at
    ), forgotten AS (${forgetDeletedEvents('deleted')})
    SELECT 1`);
}

/** How old a remembered contact is when its events are deleted once more. */
export const DELETED_CONTACTS_SWEPT_AFTER_MS = 60_000;
/** Remembered contacts a sweep's batch takes (each batch a short transaction of its own). */
const SWEEP_BATCH = 1_000;
/** A sweep stops after this long; the next hour's goes on. */
const SWEEP_MS = 60_000;

/**
 * Storage maintenance: the events of contacts deleted at least DELETED_CONTACTS_SWEPT_AFTER_MS ago
 * (any an event written as the contact was deleted left behind), then the contacts are forgotten.
 * Returns how many contacts were forgotten and events deleted.
 */
export async function sweepDeletedContacts(database: Database, now: Date): Promise<{ contacts: number; events: number }> {
  const cutoff = new Date(now.getTime() - DELETED_CONTACTS_SWEPT_AFTER_MS).toISOString();
  const swept = { contacts: 0, events: 0 };
  const ends = performance.now() + SWEEP_MS;
  for (;;) {
    const batch = await runBatch(database, async (db) => {
      const { rows } = await db.execute<{ picked: number; deleted: number }>(sql`
        WITH picked AS MATERIALIZED (
          SELECT contact_id FROM deleted_contacts WHERE deleted_at < ${cutoff}::timestamptz
           ORDER BY deleted_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED
        ), deleted AS (
          DELETE FROM events AS e WHERE e.contact_id = ANY((SELECT array_agg(contact_id) FROM picked)::text[])
          RETURNING e.project_id, e.name, e.created_at
        ), forgotten AS (${forgetDeletedEvents('deleted')}),
        forgot AS (DELETE FROM deleted_contacts AS d WHERE d.contact_id IN (SELECT contact_id FROM picked))
        SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM deleted)::int AS deleted`);
      return rows[0];
    });
    swept.contacts += batch.picked;
    swept.events += batch.deleted;
    if (batch.picked < SWEEP_BATCH || performance.now() > ends) return swept;
  }
}
