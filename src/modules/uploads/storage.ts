import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, statfs, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Config } from '../../config.ts';
import { createS3Storage } from './s3.ts';

/**
 * A stored image, read as a stream: the public GET sends it as the client reads it. Read whole,
 * forty clients that never read their answer held 400 MB of one 10 MB image.
 */
export type StoredObject = { body: Readable; size: number; contentType: string };

/** Where uploaded images live. Keys are already validated `<projectId>/<uuid>.<ext>` strings. */
export type UploadStorage = {
  put(key: string, bytes: Buffer, contentType: string): Promise<void>;
  get(key: string): Promise<StoredObject | null>;
  /** Removes one image; one already gone is fine. */
  delete(key: string): Promise<void>;
  /** Removes a deleted project's images: `keys` are those its rows listed (local storage removes its whole folder). */
  deleteProject(projectId: string, keys: readonly string[]): Promise<void>;
  /** Whether `bytes` more still leave the configured free space on the disk (always true for a bucket). */
  hasRoomFor(bytes: number): Promise<boolean>;
};

/** `<DATA_DIR>/uploads/<projectId>`: never anything else, whatever `projectId` holds. */
const PROJECT_DIR = /^prj_[0-9a-f]{32}$/;

/**
 * Files under `dir`; the content type is not stored, so `get` reports it from the key's extension via `typeOf`.
 * `minFreeBytes` is the space a write must leave free: `dir` is on the same disk as the embedded PostgreSQL.
 */
export function createFileStorage(dir: string, typeOf: (key: string) => string, minFreeBytes = 0): UploadStorage {
  return {
    async put(key, bytes) {
      const file = path.join(dir, key);
      await mkdir(path.dirname(file), { recursive: true });
      // Write then rename, so a reader never sees a half-written image under its final name.
      const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
      try {
        await writeFile(tmp, bytes, { flag: 'wx' });
        await rename(tmp, file);
      } catch (err) {
        await unlink(tmp).catch(() => {}); // a disk that filled up mid-write keeps no half image
        throw err;
      }
    },
    async get(key) {
      try {
        const file = await open(path.join(dir, key));
        const stat = await file.stat().catch(async (err: unknown) => {
          await file.close();
          throw err;
        });
        if (!stat.isFile()) {
          await file.close();
          return null;
        }
        // The stream closes the file when it ends, fails or is destroyed (a client that went away).
        return { body: file.createReadStream(), size: stat.size, contentType: typeOf(key) };
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'ENOENT' || code === 'EISDIR') return null;
        throw err;
      }
    },
    async delete(key) {
      await unlink(path.join(dir, key)).catch((err: unknown) => {
        if ((err as { code?: string }).code !== 'ENOENT') throw err;
      });
    },
    async deleteProject(projectId) {
      if (!PROJECT_DIR.test(projectId)) throw new Error('not a project id');
      // The whole folder: images uploaded before uploads had rows go too.
      await rm(path.join(dir, projectId), { recursive: true, force: true });
    },
    async hasRoomFor(bytes) {
      await mkdir(dir, { recursive: true });
      const disk = await statfs(dir);
      return disk.bavail * disk.bsize - bytes >= minFreeBytes;
    },
  };
}

const cache = new WeakMap<Config, UploadStorage>();

/** The S3 bucket when S3_BUCKET is set, DATA_DIR/uploads otherwise; one instance per config. */
export function storageFor(config: Config, typeOf: (key: string) => string): UploadStorage {
  let storage = cache.get(config);
  if (!storage) {
    storage = config.s3 ? createS3Storage(config.s3) : createFileStorage(path.join(config.dataDir, 'uploads'), typeOf, config.uploadMinFreeBytes);
    cache.set(config, storage);
  }
  return storage;
}
