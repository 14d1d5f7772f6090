import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { lockKey } from '../../db/key-lock.ts';
import { busyAtLimit } from '../../http/errors.ts';

/**
 * Import and bulk jobs a project may have queued or running at once. Every project's jobs of a
 * kind share one first-in-first-out queue, one job at a time per worker process: the cap bounds
 * what one project can put ahead of another's job. Unbounded, one project kept the bulk queue full
 * (another project's job of one contact waited 63–67 s), and could queue hundreds of 5 MB imports
 * a minute within the request limit: about 3.5 s of work and 5 MB stored each.
 *
 * A job still unfinished `staleAfterMs` after it was queued no longer holds a slot: its last attempt
 * died with its worker, and it would hold the slot for ever. A bulk job ends within 3 attempts of at
 * most 5 minutes each, an import within 3 of at most 30.
 */
export const JOB_SLOTS = {
  bulk: { table: 'bulk_jobs', limit: 5, staleAfterMs: 60 * 60 * 1000, noun: 'bulk jobs', retryAfterSeconds: 2 },
  import: { table: 'import_jobs', limit: 5, staleAfterMs: 2 * 60 * 60 * 1000, noun: 'imports', retryAfterSeconds: 5 },
} as const;

export type JobKind = keyof typeof JOB_SLOTS;

/**
 * Takes one of the project's slots for a job of `kind` about to be stored in the caller's
 * transaction, or throws 429 RATE_LIMIT_EXCEEDED (Retry-After, `details.limit`). Counted under a
 * lock of the project's jobs of that kind, held to the end of the transaction: concurrent posts
 * cannot pass the cap together.
 *
 * Answers the queue priority to enqueue the job with: minus the project's jobs of that kind already
 * queued or running. The queue takes higher priorities first, so projects take turns: each one's
 * first job before anyone's second. Before, a project's five imports (about 3.5 s each) all went
 * ahead of another project's import posted just after them.
 */
export async function takeJobSlot(tx: Db, kind: JobKind, projectId: string, now: Date): Promise<{ priority: number }> {
  const slots = JOB_SLOTS[kind];
  await lockKey(tx, `${kind}-jobs:${projectId}`);
  const queuedSince = new Date(now.getTime() - slots.staleAfterMs).toISOString();
  const { rows } = await tx.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM ${sql.identifier(slots.table)}
     WHERE project_id = ${projectId} AND created_at > ${queuedSince}::timestamptz AND status IN ('queued', 'processing')`);
  if (rows[0].n >= slots.limit) {
    throw busyAtLimit(`This project already has ${slots.limit} ${slots.noun} queued or running`, slots.limit, slots.retryAfterSeconds);
  }
  return { priority: -rows[0].n };
}
