import { sql } from 'drizzle-orm';
import { takeJobSlot } from '../job-slots.ts';
import type { AppContext } from '../../../context.ts';
import { type Db, withTransaction } from '../../../db/client.ts';
import { prefixedId } from '../../../db/ids.ts';
import { recordEvents } from '../../events/record.ts';
import type { BulkError, BulkType, JobStatus } from '../../../db/schema/jobs.ts';
import { notFound } from '../../../http/errors.ts';
import { isoMs, textArray } from '../sql.ts';
import { BULK_JOB_ID, type BulkJobRecord } from './schemas.ts';
import { afterContactsDeleted } from '../deleted.ts';

export const BULK_QUEUE = 'contacts-bulk';

/**
 * Stores the job (each distinct id once, in the order given) and enqueues it in the same transaction;
 * 429 RATE_LIMIT_EXCEEDED when the project already has its bulk jobs' share of the queue (job-slots.ts).
 */
export async function createBulkJob(ctx: AppContext, projectId: string, type: BulkType, contactIds: string[]): Promise<{ jobId: string; status: 'queued' }> {
  const ids = [...new Set(contactIds)];
  const jobId = prefixedId('blk');
  const now = ctx.clock.now();
  await withTransaction(ctx.database, async ({ tx, client }) => {
    const { priority } = await takeJobSlot(tx, 'bulk', projectId, now);
    await tx.execute(sql`
      INSERT INTO bulk_jobs (id, project_id, type, status, contact_ids, total, created_at)
      VALUES (${jobId}, ${projectId}, ${type}, 'queued', ${textArray(ids)}, ${ids.length}, ${now.toISOString()}::timestamptz)`);
    await ctx.jobs.send(BULK_QUEUE, { jobId }, { client, priority });
  });
  return { jobId, status: 'queued' };
}

/**
 * Sets the subscription of many contacts of the project, set-based: one UPDATE of those whose
 * state changes and one INSERT of their `contact.subscribed`/`contact.unsubscribed` events (the
 * same events `setSubscribed` emits). Ids not in the project are ignored. Run it in a transaction.
 */
export async function setSubscribedMany(
  db: Db,
  projectId: string,
  contactIds: string[],
  subscribed: boolean,
  now: Date,
): Promise<{ changed: string[]; found: string[] }> {
  const iso = now.toISOString();
  const { rows } = await db.execute<{ id: string; changed: boolean }>(sql`
    WITH up AS (
      UPDATE contacts AS c SET subscribed = ${subscribed}, updated_at = ${iso}::timestamptz
       WHERE c.project_id = ${projectId} AND c.id = ANY(${textArray(contactIds)}) AND c.subscribed <> ${subscribed}
      RETURNING c.id
    )
    SELECT c.id, up.id IS NOT NULL AS changed
      FROM contacts AS c LEFT JOIN up ON up.id = c.id
     WHERE c.project_id = ${projectId} AND c.id = ANY(${textArray(contactIds)})`);
  const changed = rows.filter((r) => r.changed).map((r) => r.id);
  if (changed.length > 0) {
    const name = subscribed ? 'contact.subscribed' : 'contact.unsubscribed';
    await recordEvents(
      db,
      changed.map((contactId) => ({ projectId, contactId, name, data: null, createdAt: now })),
    );
  }
  return { changed, found: rows.map((r) => r.id) };
}

/**
 * Deletes many contacts of the project, then what names them (./deleted.ts: their emails are left
 * without them, their events deleted), in the caller's transaction; returns the ids deleted.
 */
export async function deleteContactsMany(db: Db, projectId: string, contactIds: string[], now: Date): Promise<string[]> {
  const { rows } = await db.execute<{ id: string }>(
    sql`DELETE FROM contacts WHERE project_id = ${projectId} AND id = ANY(${textArray(contactIds)}) RETURNING id`,
  );
  const deleted = rows.map((r) => r.id);
  await afterContactsDeleted(db, projectId, deleted, now);
  return deleted;
}

type JobRow = {
  id: string;
  type: BulkType;
  status: JobStatus;
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: BulkError[];
  failure_reason: string | null;
  created_at: string;
  completed_at: string | null;
};

/** The bulk job, or 404 JOB_NOT_FOUND (also for another project's job or a malformed id). */
export async function getBulkJob(db: Db, projectId: string, jobId: string): Promise<BulkJobRecord> {
  if (!BULK_JOB_ID.test(jobId)) throw notFound('job', jobId);
  const { rows } = await db.execute<JobRow>(sql`
    SELECT id, type, status, total, processed, succeeded, unchanged, failed, errors, failure_reason,
           ${isoMs('created_at')} AS created_at, ${isoMs('completed_at')} AS completed_at
      FROM bulk_jobs WHERE id = ${jobId} AND project_id = ${projectId}`);
  const row = rows[0];
  if (!row) throw notFound('job', jobId);
  const record: BulkJobRecord = {
    jobId: row.id,
    type: row.type,
    status: row.status,
    total: row.total,
    processed: row.processed,
    succeeded: row.succeeded,
    unchanged: row.unchanged,
    failed: row.failed,
    errors: row.errors,
    createdAt: row.created_at,
    completedAt: row.completed_at,
  };
  if (row.status === 'failed') record.failureReason = row.failure_reason ?? 'The bulk operation failed';
  return record;
}
