import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { type Db, withTransaction } from '../../../db/client.ts';
import type { BulkError, BulkType } from '../../../db/schema/jobs.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { type BulkPayload, bulkPayload } from './schemas.ts';
import { deleteEventsOfBulkContacts } from '../../events/usage.ts';
import { BULK_QUEUE, deleteContactsMany, setSubscribedMany } from './service.ts';

/**
 * A bulk job runs in one transaction: the contact changes, their events and the job's final
 * counts commit together, so a crash or a retry never applies half a job or emits an event twice.
 * A bulk delete first deletes, in short batches, the events of its contacts that have many
 * (events/usage.ts): a failed job may have removed those, though it deleted no contact.
 */

const MAX_ATTEMPTS = 3;

/**
 * Events a run of a bulk delete removes at most before its contacts' transaction (about 1-2 s):
 * past it the job goes to the back of the queue, which every project's bulk jobs share.
 */
export const BULK_DELETE_EVENTS_PER_RUN = 200_000;

export async function runBulk(ctx: AppContext, jobId: string): Promise<void> {
  const { rows } = await ctx.database.db.execute<{ attempts: number; project_id: string; type: BulkType; contact_ids: string[] }>(sql`
    UPDATE bulk_jobs SET status = 'processing', attempts = attempts + 1
     WHERE id = ${jobId} AND status IN ('queued', 'processing')
    RETURNING attempts, project_id, type, contact_ids`);
  if (!rows[0]) return;
  try {
    const { project_id: projectId, type, contact_ids: ids } = rows[0];
    if (type === 'bulk-delete' && !(await deleteEventsOfBulkContacts(ctx.database, projectId, ids, BULK_DELETE_EVENTS_PER_RUN))) {
      // Not an attempt: the job goes on after the jobs queued behind it.
      await ctx.database.db.execute(sql`UPDATE bulk_jobs SET attempts = attempts - 1 WHERE id = ${jobId}`);
      await ctx.jobs.send(BULK_QUEUE, { jobId });
      return;
    }
    await withTransaction(ctx.database, ({ tx }) => applyJob(ctx, tx, jobId));
  } catch (err) {
    if (rows[0].attempts < MAX_ATTEMPTS) throw err;
    ctx.log.error({ err, jobId }, 'bulk job failed');
    const reason =
      rows[0].type === 'bulk-delete'
        ? 'An unexpected error stopped the operation; no contact was deleted (the events of contacts with many may have been)'
        : 'An unexpected error stopped the operation; no contact was changed';
    await ctx.database.db.execute(sql`
      UPDATE bulk_jobs SET status = 'failed', failure_reason = ${reason},
             completed_at = ${ctx.clock.now().toISOString()}::timestamptz
       WHERE id = ${jobId} AND status = 'processing'`);
  }
}

async function applyJob(ctx: AppContext, tx: Db, jobId: string): Promise<void> {
  const { rows } = await tx.execute<{ project_id: string; type: BulkType; contact_ids: string[] }>(
    sql`SELECT project_id, type, contact_ids FROM bulk_jobs WHERE id = ${jobId} AND status = 'processing' FOR UPDATE`,
  );
  const job = rows[0];
  if (!job) return; // another run finished it
  const now = ctx.clock.now();
  const ids = job.contact_ids;
  let succeeded: Set<string>;
  let found: Set<string>;
  if (job.type === 'bulk-delete') {
    succeeded = new Set(await deleteContactsMany(tx, job.project_id, ids, now));
    found = succeeded;
  } else {
    const result = await setSubscribedMany(tx, job.project_id, ids, job.type === 'bulk-subscribe', now);
    succeeded = new Set(result.changed);
    found = new Set(result.found);
  }
  const errors: BulkError[] = ids.filter((id) => !found.has(id)).map((id) => ({ id, reason: 'not_found' }));
  await tx.execute(sql`
    UPDATE bulk_jobs SET status = 'completed', processed = total, succeeded = ${succeeded.size},
           unchanged = ${found.size - succeeded.size}, failed = ${errors.length}, errors = ${JSON.stringify(errors)}::jsonb,
           completed_at = ${now.toISOString()}::timestamptz
     WHERE id = ${jobId}`);
}

export const bulkQueue: QueueDef<BulkPayload> = {
  name: BULK_QUEUE,
  schema: bulkPayload,
  handler: (ctx, data) => runBulk(ctx, data.jobId),
  retryLimit: MAX_ATTEMPTS - 1,
  retryDelaySeconds: 2,
  expireInSeconds: 5 * 60,
};
