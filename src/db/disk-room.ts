import { statfsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { loggableError } from '../loggable-error.ts';
import { StartupError } from '../startup-error.ts';

/**
 * Whether the database's disk still has DATABASE_MIN_FREE_MB free. PostgreSQL that cannot write its
 * WAL stops for every project, and open sign-up lets one project add about 1 GB a minute; below
 * the floor the API refuses writes that add data (http/disk-floor.ts) and campaigns stop writing
 * new emails (campaigns/fanout.ts), while deliveries, feedback, unsubscribes and deletes go on in
 * the space the floor kept.
 */
export type DiskRoom = {
  /** Whether a disk is watched at all (config.databaseDisk): without one there is always room. */
  watched: boolean;
  /** As last read: a reading is used for a second, then the next call starts another (the answer never waits for it). */
  hasRoom(): boolean;
};

/** How long one reading of the free space is used. */
const READING_MS = 1000;

const UNWATCHED: DiskRoom = { watched: false, hasRoom: () => true };

const freeBytes = (s: { bavail: number; bsize: number }) => s.bavail * s.bsize;
const inMb = (bytes: number) => Math.floor(bytes / (1024 * 1024));

/** Watches `disk` (config.databaseDisk); without one, there is always room. Read once here: a path that cannot be read stops start-up. */
export function watchDiskRoom(disk: Config['databaseDisk'], log: Logger): DiskRoom {
  if (!disk) return UNWATCHED;
  let free: number;
  try {
    free = freeBytes(statfsSync(disk.path));
  } catch (err) {
    throw new StartupError(`The database's disk cannot be read at ${disk.path}: set DATABASE_DISK_PATH to a directory on it, or DATABASE_MIN_FREE_MB=0`, {
      cause: err,
    });
  }
  let room = true;
  let readAt = Date.now();
  let reading = false;
  const note = (bytes: number) => {
    const now = bytes >= disk.minFreeBytes;
    const at = { path: disk.path, freeMb: inMb(bytes), minFreeMb: inMb(disk.minFreeBytes) };
    if (room && !now) log.error(at, "the database's disk is nearly full: writes that add data are refused (507) until space is freed");
    if (!room && now) log.info(at, "the database's disk has room again: writes are accepted");
    room = now;
  };
  note(free);
  const read = async () => {
    try {
      note(freeBytes(await statfs(disk.path)));
    } catch (err) {
      log.warn({ error: loggableError(err), path: disk.path }, "the database's disk could not be read; its last reading stands");
    } finally {
      readAt = Date.now();
      reading = false;
    }
  };
  return {
    watched: true,
    hasRoom() {
      if (!reading && Date.now() - readAt >= READING_MS) {
        reading = true;
        void read();
      }
      return room;
    },
  };
}
