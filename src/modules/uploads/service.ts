import type { Readable } from 'node:stream';
import { and, desc, eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { uploads } from '../../db/schema/uploads.ts';
import { ApiError, notFound, validationError } from '../../http/errors.ts';
import { afterCursor, cursorPage } from '../../http/keyset.ts';
import { loggableError } from '../../loggable-error.ts';
import { CONTENT_TYPE_BY_EXT, type ImageExt, type ImageType, detectImageType, looksLikeSvg } from './image-type.ts';
import { type UploadUsage, recordWithinQuota, usageOf } from './quota.ts';
import { storageFor } from './storage.ts';

export type Upload = { url: string; key: string; contentType: ImageType['contentType']; size: number };
export type UploadItem = Upload & { createdAt: string };
export type UploadList = { data: UploadItem[]; cursor: string | undefined; hasMore: boolean; total: number; usage: UploadUsage };

/** `<projectId>/<uuidv7>.<ext>`: the only shape ever written, and the only one ever served. */
const KEY = /^prj_[0-9a-f]{32}\/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.(jpg|png|gif|webp)$/;

const typeOfKey = (key: string) => CONTENT_TYPE_BY_EXT[key.slice(key.lastIndexOf('.') + 1) as ImageExt];
const storage = (ctx: AppContext) => storageFor(ctx.config, typeOfKey);

export const publicUrlFor = (ctx: AppContext, key: string) => `${ctx.config.publicUrl}/uploads/${key}`;

const diskNearlyFull = () => new ApiError(507, 'INSUFFICIENT_STORAGE', "The server's disk is nearly full; uploads are paused");

/**
 * Checks the bytes, records them within the project's quota, stores them (DATA_DIR/uploads or the
 * S3 bucket) and returns the public URL. The row is recorded first, so the quota holds while the
 * bytes are written without a lock; a failed write takes its row back.
 */
export async function storeImage(ctx: AppContext, projectId: string, bytes: Buffer): Promise<Upload> {
  if (bytes.length === 0) {
    throw validationError([{ field: 'file', message: 'File is empty', code: 'too_small' }]);
  }
  const type = detectImageType(bytes);
  if (!type) {
    const message = looksLikeSvg(bytes)
      ? 'SVG images are not accepted because they can contain scripts; upload a JPEG, PNG, GIF or WebP'
      : 'File is not a JPEG, PNG, GIF or WebP image';
    throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', message, {
      details: { accepted: Object.values(CONTENT_TYPE_BY_EXT) },
    });
  }
  const now = ctx.clock.now();
  const key = `${projectId}/${uuidv7(now.getTime())}.${type.ext}`;
  const store = storage(ctx);
  if (!(await store.hasRoomFor(bytes.length))) {
    ctx.log.warn({ projectId, size: bytes.length }, 'upload refused: DATA_DIR/uploads would leave less than UPLOAD_MIN_FREE_MB free');
    throw diskNearlyFull();
  }
  await recordWithinQuota(ctx, { key, projectId, size: bytes.length, contentType: type.contentType, createdAt: now });
  try {
    await store.put(key, bytes, type.contentType);
  } catch (err) {
    await forgetUpload(ctx, key);
    throw err;
  }
  return { url: publicUrlFor(ctx, key), key, contentType: type.contentType, size: bytes.length };
}

/** Takes back the row of an image whose write failed (best effort: a row left behind only counts until deleted). */
async function forgetUpload(ctx: AppContext, key: string): Promise<void> {
  await ctx.database.db
    .delete(uploads)
    .where(eq(uploads.key, key))
    .catch((err: unknown) => ctx.log.warn({ error: loggableError(err), key }, 'an upload whose write failed kept its row'));
}

type UploadRow = typeof uploads.$inferSelect;

const toItem =
  (ctx: AppContext) =>
  (row: UploadRow): UploadItem => ({
    key: row.key,
    url: publicUrlFor(ctx, row.key),
    contentType: row.contentType as ImageType['contentType'],
    size: row.size,
    createdAt: row.createdAt.toISOString(),
  });

/** The project's uploads, newest first, with what they use of the quota (`total` on the first page only, as every cursor list). */
export async function listUploads(ctx: AppContext, projectId: string, q: { limit: number; cursor?: string }): Promise<UploadList> {
  const db = ctx.database.db;
  const rows = await db
    .select()
    .from(uploads)
    .where(
      and(
        eq(uploads.projectId, projectId),
        afterCursor(q.cursor, uploads.createdAt, uploads.key, (k) => KEY.test(k)),
      ),
    )
    .orderBy(desc(uploads.createdAt), desc(uploads.key))
    .limit(q.limit + 1);
  const usage = await usageOf(db, ctx.config, projectId);
  return { ...cursorPage(rows, q.limit, (r) => [r.createdAt, r.key], toItem(ctx)), total: q.cursor ? 0 : usage.files, usage };
}

/**
 * Deletes one of the project's uploads: the row, then the file. A file that cannot be removed puts
 * its row back and the delete answers the failure, so it can be tried again; no connection is held
 * while the storage answers (an S3 DELETE may take up to 30 s). Another project's key answers
 * exactly as an unknown one.
 */
export async function deleteUpload(ctx: AppContext, projectId: string, key: string): Promise<void> {
  if (!KEY.test(key) || !key.startsWith(`${projectId}/`)) throw notFound('upload', key);
  const [row] = await ctx.database.db
    .delete(uploads)
    .where(and(eq(uploads.key, key), eq(uploads.projectId, projectId)))
    .returning();
  if (!row) throw notFound('upload', key);
  try {
    await storage(ctx).delete(key);
  } catch (err) {
    await ctx.database.db
      .insert(uploads)
      .values(row)
      .onConflictDoNothing()
      .catch((putBack: unknown) => ctx.log.warn({ error: loggableError(putBack), key }, 'an upload whose file could not be deleted lost its row'));
    throw err;
  }
}

/**
 * The keys a deleted project's images must be removed by, read in the deleting transaction before
 * its rows go. Local storage removes the project's folder whole, so it needs none.
 */
export async function projectUploadKeys(ctx: AppContext, db: Db, projectId: string): Promise<string[]> {
  if (!ctx.config.s3) return [];
  const rows = await db.select({ key: uploads.key }).from(uploads).where(eq(uploads.projectId, projectId));
  return rows.map((r) => r.key);
}

/** Removes a deleted project's images, once its delete has committed; a failure is logged, not thrown. */
export async function removeProjectUploads(ctx: AppContext, projectId: string, keys: readonly string[]): Promise<void> {
  try {
    await storage(ctx).deleteProject(projectId, keys);
  } catch (err) {
    ctx.log.warn({ error: loggableError(err), projectId, images: keys.length }, "removing a deleted project's images failed");
  }
}

export type StoredImage = { body: Readable; contentType: string; size: number };

/** Reads an uploaded image by key; any key not of our own shape is simply not found. */
export async function openImage(ctx: AppContext, key: string): Promise<StoredImage> {
  if (!KEY.test(key)) throw notFound('upload', key);
  const stored = await storage(ctx).get(key);
  if (!stored) throw notFound('upload', key);
  // Served as the type the key says, whatever metadata the bucket holds: the key's type was checked on upload.
  return { body: stored.body, contentType: typeOfKey(key), size: stored.size };
}
