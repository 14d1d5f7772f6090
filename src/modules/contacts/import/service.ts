import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { type Db, withTransaction } from '../../../db/client.ts';
import { prefixedId } from '../../../db/ids.ts';
import type { ImportError, JobStatus } from '../../../db/schema/jobs.ts';
import { notFound } from '../../../http/errors.ts';
import { isStorableText } from '../../../db/storable-text.ts';
import { isoMs } from '../sql.ts';
import { takeJobSlot } from '../job-slots.ts';
import { checkUpload } from './csv.ts';
import { IMPORT_JOB_ID, type ImportJobRecord } from './schemas.ts';

export const IMPORT_QUEUE = 'contacts-import';

/**
 * Checks the upload (text, UTF-8, a header with an `email` column: 400 otherwise), stores it on a
 * new job row and enqueues the job in the same transaction; 429 RATE_LIMIT_EXCEEDED when the
 * project already has its imports' share of the queue (job-slots.ts).
 */
export async function createImport(
  ctx: AppContext,
  projectId: string,
  upload: { bytes: Buffer; fileName: string | null },
): Promise<{ jobId: string; status: 'queued' }> {
  checkUpload(upload.bytes);
  const fileName = upload.fileName && isStorableText(upload.fileName) ? upload.fileName.slice(0, 255) : null;
  const jobId = prefixedId('imp');
  const now = ctx.clock.now();
  await withTransaction(ctx.database, async ({ tx, client }) => {
    const { priority } = await takeJobSlot(tx, 'import', projectId, now);
    await tx.execute(sql`
      INSERT INTO import_jobs (id, project_id, status, file_name, file, created_at)
      VALUES (${jobId}, ${projectId}, 'queued', ${fileName}, ${upload.bytes}, ${now.toISOString()}::timestamptz)`);
    await ctx.jobs.send(IMPORT_QUEUE, { jobId }, { client, priority });
  });
  return { jobId, status: 'queued' };
}

type JobRow = {
  id: string;
  status: JobStatus;
  file_name: string | null;
  total_rows: number;
  processed_rows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: ImportError[];
  error_count: number;
  failure_reason: string | null;
  created_at: string;
  completed_at: string | null;
};

/** The import job, or 404 JOB_NOT_FOUND (also for another project's job or a malformed id). */
export async function getImportJob(db: Db, projectId: string, jobId: string): Promise<ImportJobRecord> {
  if (!IMPORT_JOB_ID.test(jobId)) throw notFound('job', jobId);
  const { rows } = await db.execute<JobRow>(sql`
    SELECT id, status, file_name, total_rows, processed_rows, imported, updated, skipped, errors, error_count,
           failure_reason, ${isoMs('created_at')} AS created_at, ${isoMs('completed_at')} AS completed_at
      FROM import_jobs WHERE id = ${jobId} AND project_id = ${projectId}`);
  const row = rows[0];
  if (!row) throw notFound('job', jobId);
  const record: ImportJobRecord = {
    jobId: row.id,
    type: 'import',
    status: row.status,
    fileName: row.file_name,
    totalRows: row.total_rows,
    processedRows: row.processed_rows,
    imported: row.imported,
    updated: row.updated,
    skipped: row.skipped,
    errors: row.errors,
    errorCount: row.error_count,
    createdAt: row.created_at,
    completedAt: row.completed_at,
  };
  if (row.status === 'failed') record.failureReason = row.failure_reason ?? 'The import failed';
  return record;
}
