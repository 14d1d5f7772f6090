import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { prefixedId } from '../../../db/ids.ts';
import type { ImportError } from '../../../db/schema/jobs.ts';
import { ApiError } from '../../../http/errors.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { customDataSchema, splitCustomData } from '../custom-data.ts';
import { type BatchRow, upsertBatch } from './batch.ts';
import { type CsvRecord, type Layout, type RowCheck, checkRow, csvRecordBatches, describeCsvError, layoutOfBytes, rowData } from './csv.ts';
import { type ImportPayload, MAX_STORED_ERRORS, importPayload } from './schemas.ts';
import { IMPORT_QUEUE } from './service.ts';

/**
 * The import engine. Pass 1 parses the whole file once to count its rows and find each email's
 * last row (so a duplicated email is imported from its last row only); pass 2 streams it again
 * and writes batches. Both read the file 16 KB at a time, letting the event loop run in between
 * (csvRecordBatches). Each batch commits its contacts together with the job's counters and
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
    // An ApiError's field error says what was wrong (the custom fields' cap), its message only that something was.
    const reason = err instanceof ApiError ? (err.errors?.[0]?.message ?? err.message) : describeCsvError(err);
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

/**
 * Pass 1, kept compact (one map entry per distinct valid email, nothing per refused row): the
 * number of data rows and, for each valid email, the index of its last row, the only one of its
 * rows imported. Pass 2 checks each row again and compares.
 */
type Plan = { total: number; lastIndexOf: Map<string, number> };

async function planRows(file: Buffer, layout: Layout): Promise<Plan> {
  const lastIndexOf = new Map<string, number>();
  let total = 0;
  for await (const records of csvRecordBatches(file, layout.delimiter)) {
    for (const { cells } of records) {
      const verdict = checkRow(layout, cells);
      if (verdict.ok) lastIndexOf.set(verdict.email, total);
      total++;
    }
  }
  return { total, lastIndexOf };
}

/** The verdict on the data row at `index`: checkRow's, or a duplicate when a later row has its email. */
function verdictOf(plan: Plan, layout: Layout, cells: string[], index: number): RowCheck {
  const verdict = checkRow(layout, cells);
  if (verdict.ok && plan.lastIndexOf.get(verdict.email) !== index) return { ok: false, email: verdict.email, reason: 'duplicate_email' };
  return verdict;
}

type Pending = { size: number; rows: BatchRow[]; rowOf: Map<string, number>; firstValues: Record<string, unknown>; errors: ImportError[] };

const emptyBatch = (): Pending => ({ size: 0, rows: [], rowOf: new Map(), firstValues: Object.create(null), errors: [] });

/** Adds the data row at `index` to the batch: a contact to write or a reported error. */
function addRow(batch: Pending, typed: Set<string>, plan: Plan, layout: Layout, { row, cells }: CsvRecord, index: number): void {
  const verdict = verdictOf(plan, layout, cells, index);
  batch.size++;
  if (!verdict.ok) {
    batch.errors.push({ row, email: verdict.email, reason: verdict.reason });
    return;
  }
  const data = splitCustomData(rowData(layout, cells)).set;
  // The bounds of one request's `data` hold for a row too (its size, storable text).
  const checked = customDataSchema.safeParse(data);
  if (!checked.success) {
    const reason = checked.error.issues.some((i) => i.code === 'too_big') ? 'data_too_big' : 'invalid_data';
    batch.errors.push({ row, email: verdict.email, reason });
    return;
  }
  for (const key in data) {
    if (!typed.has(key)) {
      typed.add(key); // the first value of a column this run writes types it
      batch.firstValues[key] = data[key];
    }
  }
  batch.rows.push({ id: prefixedId('cnt'), email: verdict.email, data });
  batch.rowOf.set(verdict.email, row);
}

async function importFile(ctx: AppContext, jobId: string, job: ClaimedJob): Promise<void> {
  const layout = layoutOfBytes(job.file);
  const plan = await planRows(job.file, layout);
  await ctx.database.db.execute(sql`UPDATE import_jobs SET total_rows = ${plan.total} WHERE id = ${jobId}`);

  const progress = { processed: job.processedRows, errorCount: job.errorCount };
  const typed = new Set<string>(); // columns whose first value a batch of this run already carries
  let batch = emptyBatch();
  let index = 0;
  let done = false;
  // The next batch is parsed while the previous one commits; commits stay strictly in order.
  let committing: Promise<void> = Promise.resolve();
  try {
    for await (const records of csvRecordBatches(job.file, layout.delimiter)) {
      for (const record of records) {
        const at = index++;
        if (at < job.processedRows) continue; // committed by an earlier attempt
        addRow(batch, typed, plan, layout, record, at);
        if (batch.size >= BATCH_ROWS) {
          await committing;
          done = index === plan.total;
          committing = commitBatch(ctx, jobId, job.projectId, batch, progress, done);
          committing.catch(() => {}); // awaited before the next batch or after the loop
          batch = emptyBatch();
        }
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
  let errors: ImportError[] = [];
  await withTransaction(ctx.database, async ({ tx }) => {
    // Not waiting for the WAL flush is safe here: a batch lost in a crash loses its checkpoint with
    // it (same transaction, WAL order), so the retried job redoes exactly that batch.
    await tx.execute(sql`SET LOCAL synchronous_commit = off`);
    const { rows } = await tx.execute<{ processed_rows: number }>(
      sql`SELECT processed_rows FROM import_jobs WHERE id = ${jobId} AND status = 'processing' FOR UPDATE`,
    );
    if (rows[0]?.processed_rows !== progress.processed) throw new Superseded();
    const counts = batch.rows.length > 0 ? await upsertBatch(tx, projectId, batch.rows, batch.firstValues, now) : { imported: 0, updated: 0, refused: [] };
    const refused = counts.refused.map((email): ImportError => ({ row: batch.rowOf.get(email) ?? 0, email, reason: 'data_too_big' }));
    errors = [...batch.errors, ...refused].sort((a, b) => a.row - b.row);
    const kept = errors.slice(0, Math.max(0, MAX_STORED_ERRORS - progress.errorCount));
    await tx.execute(sql`
      UPDATE import_jobs SET
        processed_rows = processed_rows + ${batch.size},
        imported = imported + ${counts.imported},
        updated = updated + ${counts.updated},
        skipped = skipped + ${batch.size - counts.imported - counts.updated},
        ${kept.length > 0 ? sql`errors = errors || ${JSON.stringify(kept)}::jsonb,` : sql``}
        error_count = error_count + ${errors.length}
        ${last ? sql`, status = 'completed', file = NULL, completed_at = ${now.toISOString()}::timestamptz` : sql``}
       WHERE id = ${jobId}`);
  });
  progress.processed += batch.size;
  progress.errorCount += errors.length;
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
