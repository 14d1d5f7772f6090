import type { Readable } from 'node:stream';
import type { AppContext } from '../../context.ts';
import { uuidv7 } from '../../db/ids.ts';
import { ApiError, notFound, validationError } from '../../http/errors.ts';
import { CONTENT_TYPE_BY_EXT, type ImageExt, type ImageType, detectImageType, looksLikeSvg } from './image-type.ts';
import { storageFor } from './storage.ts';

export type Upload = { url: string; key: string; contentType: ImageType['contentType']; size: number };

/** `<projectId>/<uuidv7>.<ext>`: the only shape ever written, and the only one ever served. */
const KEY = /^prj_[0-9a-f]{32}\/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.(jpg|png|gif|webp)$/;

const typeOfKey = (key: string) => CONTENT_TYPE_BY_EXT[key.slice(key.lastIndexOf('.') + 1) as ImageExt];
const storage = (ctx: AppContext) => storageFor(ctx.config, typeOfKey);

export const publicUrlFor = (ctx: AppContext, key: string) => `${ctx.config.publicUrl}/uploads/${key}`;

/** Checks the bytes, stores them (DATA_DIR/uploads or the S3 bucket) and returns the public URL. */
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
  const key = `${projectId}/${uuidv7(ctx.clock.now().getTime())}.${type.ext}`;
  await storage(ctx).put(key, bytes, type.contentType);
  return { url: publicUrlFor(ctx, key), key, contentType: type.contentType, size: bytes.length };
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
