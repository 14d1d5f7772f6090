import { type SQL, sql } from 'drizzle-orm';
import type { Database, Db } from '../../db/client.ts';
import { runBatch } from '../../db/batches.ts';
import { textArray } from './sql.ts';
import { forgetDeletedEvents } from '../analytics/rollups.ts';

/**
 * What a contact's delete does to the rows that name it without a foreign key (migrations 0025
 * and 0026: the keys' checks were about 40 % of an event insert's time, and each locked the
 * contact's row for every email and `email.*` event). Every delete of contacts calls this right
 * after, in its transaction: their emails stay, without a contact (as the key's SET NULL left
 * them), their events go (with their part of the analytics day counts; the event counters follow
 * by trigger, events/counts.ts), and the contacts are remembered in `deleted_contacts`.
 *
 * Each in a statement of its own, in this order: under READ COMMITTED a statement sees what
 * committed before it began. The emails' UPDATE waits for the transactions that hold an email of
 * the contact (every status change writes its event in the transaction that updates its email);
 * the contacts' DELETE before it waited for those that held the contact's row (a track's upsert, a
 * subscription change, a membership row). The events' DELETE then sees what they wrote. A writer
 * that held neither (a transient bounce's event, a campaign batch whose audience was read before
 * the delete) can still commit a row for the contact just after; storage maintenance goes over
 * each remembered contact once more when it is DELETED_CONTACTS_SWEPT_AFTER_MS old
 * (sweepDeletedContacts).
 */
export async function afterContactsDeleted(tx: Db, projectId: string, contactIds: string[], now: Date): Promise<void> {
  if (contactIds.length === 0) return;
  const ids = textArray(contactIds);
  await detachRowsOf(
    tx,
    ids,
    sql`INSERT INTO deleted_contacts (contact_id, project_id, deleted_at)
        SELECT id, ${projectId}, ${now.toISOString()}::timestamptz FROM unnest(${ids}) AS id
        ON CONFLICT (contact_id) DO UPDATE SET deleted_at = excluded.deleted_at`,
  );
}

/**
 * The rows that name the contacts `ids` (contact ids are unique across projects): their emails are
 * left without a contact, then, in a statement of its own, their events are deleted with their
 * part of the day counts, and `remembering` (a write to `deleted_contacts`) is made.
 */
async function detachRowsOf(db: Db, ids: SQL, remembering: SQL): Promise<{ emails: number; events: number }> {
  const emails = await db.execute(sql`UPDATE emails SET contact_id = NULL WHERE contact_id = ANY(${ids})`);
  const { rows } = await db.execute<{ deleted: number }>(sql`
    WITH remembering AS (${remembering}), deleted AS (
      DELETE FROM events AS e WHERE e.contact_id = ANY(${ids})
      RETURNING e.project_id, e.name, e.created_at
    ), forgotten AS (${forgetDeletedEvents('deleted')})
    SELECT count(*)::int AS deleted FROM deleted`);
  return { emails: emails.rowCount ?? 0, events: rows[0].deleted };
}

/** How old a remembered contact is when storage maintenance goes over it once more. */
export const DELETED_CONTACTS_SWEPT_AFTER_MS = 60_000;
/** Remembered contacts a sweep's batch takes (each batch a short transaction of its own). */
const SWEEP_BATCH = 1_000;
/** A sweep stops after this long; the next hour's goes on. */
const SWEEP_MS = 60_000;

/**
 * Storage maintenance: for contacts deleted at least DELETED_CONTACTS_SWEPT_AFTER_MS ago, what a
 * writer committed for them just after their delete (emails lose the contact, events go); then
 * the contacts are forgotten. Returns how many contacts were forgotten, emails detached and events
 * deleted.
 */
export async function sweepDeletedContacts(database: Database, now: Date): Promise<{ contacts: number; emails: number; events: number }> {
  const cutoff = new Date(now.getTime() - DELETED_CONTACTS_SWEPT_AFTER_MS).toISOString();
  const swept = { contacts: 0, emails: 0, events: 0 };
  const ends = performance.now() + SWEEP_MS;
  for (;;) {
    const batch = await runBatch(database, async (db) => {
      const { rows } = await db.execute<{ ids: string[] }>(sql`
        SELECT coalesce(array_agg(contact_id), '{}') AS ids FROM (
          SELECT contact_id FROM deleted_contacts WHERE deleted_at < ${cutoff}::timestamptz
           ORDER BY deleted_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED
        ) AS picked`);
      const ids = textArray(rows[0].ids);
      const detached = await detachRowsOf(db, ids, sql`DELETE FROM deleted_contacts WHERE contact_id = ANY(${ids})`);
      return { picked: rows[0].ids.length, ...detached };
    });
    swept.contacts += batch.picked;
    swept.emails += batch.emails;
    swept.events += batch.events;
    if (batch.picked < SWEEP_BATCH || performance.now() > ends) return swept;
  }
}
