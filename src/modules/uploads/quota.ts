import { eq, sql } from 'drizzle-orm';
import type { Config } from '../../config.ts';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { lockKey } from '../../db/key-lock.ts';
import { uploads } from '../../db/schema/uploads.ts';
import { limitReached } from '../../http/errors.ts';

/**
 * What a project may keep uploaded: UPLOAD_QUOTA_MB in all, and at most MAX_FILES_PER_PROJECT
 * images. Without it one project could fill DATA_DIR (the embedded PostgreSQL's disk) for everyone.
 */
export const MAX_FILES_PER_PROJECT = 10_000;

export type UploadUsage = { bytes: number; files: number; quotaBytes: number; maxFiles: number };

export type UploadRow = typeof uploads.$inferInsert;

export async function usageOf(db: Db, config: Config, projectId: string): Promise<UploadUsage> {
  const [used] = await db
    .select({ bytes: sql<string>`coalesce(sum(${uploads.size}), 0)::bigint`, files: sql<number>`count(*)::int` })
    .from(uploads)
    .where(eq(uploads.projectId, projectId));
  return { bytes: Number(used.bytes), files: used.files, quotaBytes: config.uploadQuotaBytes, maxFiles: MAX_FILES_PER_PROJECT };
}

const MB = 1024 * 1024;
const count = (n: number) => n.toLocaleString('en-US');
const inMb = (bytes: number) => `${(bytes / MB).toFixed(1).replace(/\.0$/, '')} MB`;

function assertFits(usage: UploadUsage, size: number): void {
  if (usage.files >= usage.maxFiles) {
    throw limitReached(
      `A project can keep at most ${count(usage.maxFiles)} uploaded images and this one has ${count(usage.files)}; delete images first (DELETE /uploads/<key>)`,
      usage.maxFiles,
    );
  }
  if (usage.bytes + size > usage.quotaBytes) {
    throw limitReached(
      `This image (${inMb(size)}) does not fit: the project's images use ${inMb(usage.bytes)} of its ${inMb(usage.quotaBytes)} upload quota. ` +
        'Delete images (DELETE /uploads/<key>), or ask the operator to raise UPLOAD_QUOTA_MB',
      usage.quotaBytes,
    );
  }
}

/**
 * Records an image about to be written, if it fits the project's quota. Counted and recorded under
 * a lock of the project's uploads, so concurrent uploads (in any process) cannot pass the quota
 * together. The lock is held for two statements, never while the bytes are written.
 */
export async function recordWithinQuota(ctx: AppContext, row: UploadRow): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    await lockKey(tx, `uploads:${row.projectId}`);
    assertFits(await usageOf(tx, ctx.config, row.projectId), row.size);
    await tx.insert(uploads).values(row);
  });
}
