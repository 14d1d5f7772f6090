import { sql } from 'drizzle-orm';
import type { Database, Db } from './client.ts';
import { isTransientDbError } from './pg-error.ts';
import { isStatementTimeout, withStatementTimeout } from './statement-timeout.ts';
import { conflict } from '../http/errors.ts';

/**
 * Long writes (a field removed from every contact, every event of a name deleted) run as short
 * batches, each one transaction of its own: no pooled connection or row lock is held between
 * batches, and a batch's size adapts to keep it near a target duration.
 */

/** A batch's size: the first, the bounds, and the duration it is scaled toward. */
export type BatchSizes = { first: number; min: number; max: number; targetMs: number };

/** A batch PostgreSQL runs longer than this is cancelled (SQLSTATE 57014): the write stops with a 409 and can be asked again. */
export const BATCH_STATEMENT_MS = 10_000;
/** A batch chosen as a deadlock victim (or a serialization failure) was rolled back whole: it runs again, this many times at most. */
const BATCH_ATTEMPTS = 3;

/** Scales the batch toward `sizes.targetMs`, at most doubling it at a time. */
export function nextBatchSize(sizes: BatchSizes, size: number, tookMs: number): number {
  const scaled = Math.floor((size * sizes.targetMs) / Math.max(tookMs, 1));
  return Math.max(sizes.min, Math.min(sizes.max, size * 2, scaled));
}

/**
 * Runs one batch in a transaction of its own under BATCH_STATEMENT_MS, again when PostgreSQL rolled
 * it back as a deadlock victim or a serialization failure. `repeatableRead`: the batch reads one
 * snapshot, and a row another transaction changed after it fails the batch (and so runs it again)
 * rather than being overwritten on what the snapshot read.
 */
export async function runBatch<T>(database: Database, work: (db: Db) => Promise<T>, opts: { repeatableRead?: boolean } = {}): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withStatementTimeout(database, BATCH_STATEMENT_MS, async (db) => {
        if (opts.repeatableRead) await db.execute(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`);
        return work(db);
      });
    } catch (err) {
      if (!isTransientDbError(err) || attempt >= BATCH_ATTEMPTS) throw err;
    }
  }
}

/**
 * A batched write stopped by a batch held past BATCH_STATEMENT_MS (rows locked by other writes), or
 * rolled back again and again: a 409 saying how far it got (`stoppedAfter`, e.g. "Deleting X stopped
 * after 120 events") with `details`, for the caller to ask again. Any other error as it is.
 */
export function heldBatchConflict(err: unknown, stoppedAfter: string, details: Record<string, unknown>): unknown {
  if (!isStatementTimeout(err) && !isTransientDbError(err)) return err;
  return conflict(`${stoppedAfter}: a batch was held by other writes for too long (at most ${BATCH_STATEMENT_MS / 1000} s); ask again to finish`, details);
}
