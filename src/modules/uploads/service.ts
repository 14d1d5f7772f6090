import { randomBytes } from 'node:crypto';
import { type ReadStream, createReadStream } from 'node:fs';
import { mkdir, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AppContext } from '../../context.ts';
import { uuidv7 } from '../../db/ids.ts';
import { ApiError, notFound, validationError } from '../../http/errors.ts';
import { CONTENT_TYPE_BY_EXT, type ImageExt, type ImageType, detectImageType, looksLikeSvg } from './image-type.ts';

export type Upload = { url: string; key: string; contentType: ImageType['contentType']; size: number };

/** `<projectId>/<uuidv7>.<ext>`: the only shape ever written, and the only one ever served. */
const KEY = /^prj_[0-9a-f]{32}\/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.(jpg|png|gif|webp)$/;

const uploadsDir = (ctx: AppContext) => path.join(ctx.config.dataDir, 'uploads');

export const publicUrlFor = (ctx: AppContext, key: string) => `${ctx.config.publicUrl}/uploads/${key}`;

/** Checks the bytes, stores them under DATA_DIR/uploads and returns the public URL. */
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
  const file = path.join(uploadsDir(ctx), key);
  await mkdir(path.dirname(file), { recursive: true });
  // Write then rename, so a reader never sees a half-written image under its final name.
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, bytes, { flag: 'wx' });
  await rename(tmp, file);
  return { url: publicUrlFor(ctx, key), key, contentType: type.contentType, size: bytes.length };
}

export type StoredImage = { stream: ReadStream; contentType: string; size: number };

/** Opens an uploaded image by key; any key not of our own shape is simply not found. */
export async function openImage(ctx: AppContext, key: string): Promise<StoredImage> {
  const m = KEY.exec(key);
  if (!m) throw notFound('upload', key);
  const file = path.join(uploadsDir(ctx), key);
  try {
    const info = await stat(file);
    if (!info.isFile()) throw notFound('upload', key);
    return { stream: createReadStream(file), contentType: CONTENT_TYPE_BY_EXT[m[1] as ImageExt], size: info.size };
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') throw notFound('upload', key);
    throw err;
  }
}
