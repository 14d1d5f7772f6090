import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { prefixedId } from '../../../db/ids.ts';
import type { ImportError } from '../../../db/schema/jobs.ts';
import { ApiError } from '../../../http/errors.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { splitCustomData } from '../custom-data.ts';
import { type BatchRow, upsertBatch } from './batch.ts';
import { type Layout, type RowCheck, checkRow, csvRecords, describeCsvError, layoutOfBytes, rowData } from './csv.ts';
import { type ImportPayload, MAX_STORED_ERRORS, importPayload } from './schemas.ts';
import { IMPORT_QUEUE } from './service.ts';

/**
 * The import engine. Pass 1 parses the whole file once to count its rows and decide each row's
 * fate (so a duplicated email is imported from its last row only); pass 2 streams it again and
 * writes batches. Each batch commits its contacts together with the job's counters and
 * `processed_rows`, so a retried job resumes after the last committed batch with exact counts.
 */

const BATCH_ROWS = 1000;
const MAX_ATTEMPTS = 3;

type ClaimedJob = { projectId: string; file: Buffer; processedRows: number; errorCount: number; attempts: number };

/** Another run of the same job moved its checkpoint: this run stops without touching anything. */
class Superseded extends Error {}

export async function runImport(ctx: AppContext, jobId: string): Promise<void> {
  const job = await claim(ctx, jobId);
  if (!job) return;
  try {
    await importFile(ctx, jobId, job);
  } catch (err) {
    if (err instanceof Superseded) return;
    // A file that cannot be read fails at once: retrying cannot change it.
    const reason = err instanceof ApiError ? err.message : describeCsvError(err);
    if (reason) return fail(ctx, jobId, reason);
    if (job.attempts < MAX_ATTEMPTS) throw err;
    ctx.log.error({ err, jobId }, 'import failed');
    await fail(ctx, jobId, null);
  }
}

async function claim(ctx: AppContext, jobId: string): Promise<ClaimedJob | null> {
  const { rows } = await ctx.database.db.execute<{
    project_id: string;
    file: Buffer | null;
    processed_rows: number;
    error_count: number;
    attempts: number;
  }>(sql`
    UPDATE import_jobs SET status = 'processing', attempts = attempts + 1
     WHERE id = ${jobId} AND status IN ('queued', 'processing')
    RETURNING project_id, file, processed_rows, error_count, attempts`);
  const row = rows[0];
  if (!row?.file) return null;
  return {
    projectId: row.project_id,
    file: row.file,
    processedRows: row.processed_rows,
    errorCount: row.error_count,
    attempts: row.attempts,
  };
}

/** Pass 1: every data row's verdict, in file order. Of rows sharing an email, only the last is imported. */
async function planRows(file: Buffer, layout: Layout): Promise<RowCheck[]> {
  const verdicts: RowCheck[] = [];
  const lastIndexOf = new Map<string, number>();
  for await (const { cells } of csvRecords(file, layout.delimiter)) {
    const verdict = checkRow(layout, cells);
    if (verdict.ok) {
      const earlier = lastIndexOf.get(verdict.email);
      if (earlier !== undefined) verdicts[earlier] = { ok: false, email: verdict.email, reason: 'duplicate_email' };
      lastIndexOf.set(verdict.email, verdicts.length);
    }
    verdicts.push(verdict);
  }
  return verdicts;
}

type Pending = { size: number; rows: BatchRow[]; firstValues: Record<string, unknown>; errors: ImportError[] };

const emptyBatch = (): Pending => ({ size: 0, rows: [], firstValues: Object.create(null), errors: [] });

async function importFile(ctx: AppContext, jobId: string, job: ClaimedJob): Promise<void> {
  const layout = layoutOfBytes(job.file);
  const verdicts = await planRows(job.file, layout);
  await ctx.database.db.execute(sql`UPDATE import_jobs SET total_rows = ${verdicts.length} WHERE id = ${jobId}`);

  const progress = { processed: job.processedRows, errorCount: job.errorCount };
  const typed = new Set<string>(); // columns whose first value a batch of this run already carries
  let batch = emptyBatch();
  let index = 0;
  let done = false;
  // The next batch is parsed while the previous one commits; commits stay strictly in order.
  let committing: Promise<void> = Promise.resolve();
  try {
    for await (const { row, cells } of csvRecords(job.file, layout.delimiter)) {
      const verdict = verdicts[index++];
      if (index <= job.processedRows) continue; // committed by an earlier attempt
      batch.size++;
      if (!verdict.ok) {
        batch.errors.push({ row, email: verdict.email, reason: verdict.reason });
      } else {
        const data = splitCustomData(rowData(layout, cells)).set;
        for (const key in data) {
          if (!typed.has(key)) {
            typed.add(key);
            batch.firstValues[key] = data[key];
          }
        }
        batch.rows.push({ id: prefixedId('cnt'), email: verdict.email, data });
      }
      if (batch.size >= BATCH_ROWS) {
        await committing;
        done = index === verdicts.length;
        committing = commitBatch(ctx, jobId, job.projectId, batch, progress, done);
        committing.catch(() => {}); // awaited before the next batch or after the loop
        batch = emptyBatch();
      }
    }
  } catch (err) {
    await committing.catch(() => {});
    throw err;
  }
  await committing;
  if (!done) await commitBatch(ctx, jobId, job.projectId, batch, progress, true);
}

/** One transaction: the batch's contacts, its errors and the job's counters (and completion, on the last). */
async function commitBatch(
  ctx: AppContext,
  jobId: string,
  projectId: string,
  batch: Pending,
  progress: { processed: number; errorCount: number },
  last: boolean,
): Promise<void> {
  const now = ctx.clock.now();
  await withTransaction(ctx.database, async ({ tx }) => {
    // Not waiting for the WAL flush is safe here: a batch lost in a crash loses its checkpoint with
    // it (same transaction, WAL order), so the retried job redoes exactly that batch.
    await tx.execute(sql`SET LOCAL synchronous_commit = off`);
    const { rows } = await tx.execute<{ processed_rows: number }>(
      sql`SELECT processed_rows FROM import_jobs WHERE id = ${jobId} AND status = 'processing' FOR UPDATE`,
    );
    if (rows[0]?.processed_rows !== progress.processed) throw new Superseded();
    const counts = batch.rows.length > 0 ? await upsertBatch(tx, projectId, batch.rows, batch.firstValues, now) : { imported: 0, updated: 0 };
    const kept = batch.errors.slice(0, Math.max(0, MAX_STORED_ERRORS - progress.errorCount));
    await tx.execute(sql`
      UPDATE import_jobs SET
        processed_rows = processed_rows + ${batch.size},
        imported = imported + ${counts.imported},
        updated = updated + ${counts.updated},
        skipped = skipped + ${batch.size - counts.imported - counts.updated},
        errors = errors || ${JSON.stringify(kept)}::jsonb,
        error_count = error_count + ${batch.errors.length}
        ${last ? sql`, status = 'completed', file = NULL, completed_at = ${now.toISOString()}::timestamptz` : sql``}
       WHERE id = ${jobId}`);
  });
  progress.processed += batch.size;
  progress.errorCount += batch.errors.length;
}

/** Marks the job failed; committed batches stay, and the counters describe exactly them. */
async function fail(ctx: AppContext, jobId: string, reason: string | null): Promise<void> {
  const text =
    reason === null
      ? sql`'An unexpected error stopped the import after ' || processed_rows || ' of ' || total_rows || ' rows; those rows were imported'`
      : sql`${reason}::text`;
  await ctx.database.db.execute(sql`
    UPDATE import_jobs SET status = 'failed', failure_reason = ${text}, file = NULL,
           completed_at = ${ctx.clock.now().toISOString()}::timestamptz
     WHERE id = ${jobId} AND status IN ('queued', 'processing')`);
}

export const importQueue: QueueDef<ImportPayload> = {
  name: IMPORT_QUEUE,
  schema: importPayload,
  handler: (ctx, data) => runImport(ctx, data.jobId),
  retryLimit: MAX_ATTEMPTS - 1,
  retryDelaySeconds: 2,
  expireInSeconds: 30 * 60,
};
