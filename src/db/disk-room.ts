import { statfsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { loggableError } from '../loggable-error.ts';
import { StartupError } from '../startup-error.ts';

/**
 * How much room the database's disk has against its floor, DATABASE_MIN_FREE_MB. PostgreSQL that
 * cannot write its WAL stops for every project, and open sign-up lets one project add about 1 GB a
 * minute (more with attachments). Below twice the floor ('filling') the API refuses the writes of
 * the projects that wrote the most lately, and campaigns stop writing new emails
 * (campaigns/fanout.ts); below the floor ('low') it refuses every write that adds data
 * (http/disk-floor.ts). Deliveries, feedback, unsubscribes and deletes go on in the space kept.
 */
export type DiskLevel = 'ok' | 'filling' | 'low';

export type DiskRoom = {
  /** Whether a disk is watched at all (config.databaseDisk): without one it is always 'ok'. */
  watched: boolean;
  /** As last read: a reading is used for a second, then the next call starts another (the answer never waits for it). */
  level(): DiskLevel;
};

/** How long one reading of the free space is used. */
const READING_MS = 1000;

const UNWATCHED: DiskRoom = { watched: false, level: () => 'ok' };

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
  let level: DiskLevel = 'ok';
  let readAt = Date.now();
  let reading = false;
  const note = (bytes: number) => {
    const now: DiskLevel = bytes < disk.minFreeBytes ? 'low' : bytes < 2 * disk.minFreeBytes ? 'filling' : 'ok';
    if (now === level) return;
    const at = { path: disk.path, freeMb: inMb(bytes), minFreeMb: inMb(disk.minFreeBytes) };
    if (now === 'low') log.error(at, "the database's disk is nearly full: writes that add data are refused (507) until space is freed");
    else if (now === 'filling' && level === 'ok') {
      log.error(at, "the database's disk is filling: the projects that wrote the most lately are refused (507), and campaigns wait, until space is freed");
    } else if (now === 'filling') log.warn(at, "the database's disk has room above its floor again: only the projects that wrote the most lately are refused");
    else log.info(at, "the database's disk has room again: writes are accepted");
    level = now;
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
    level() {
      if (!reading && Date.now() - readAt >= READING_MS) {
        reading = true;
        void read();
      }
      return level;
    },
  };
}
