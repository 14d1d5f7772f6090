import { existsSync, lstatSync, realpathSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Removes a DATA_DIR that `npm start` used, with its embedded database. Run as root from a private
 * directory, Herald keeps the cluster under /var/lib/herald and links it from DATA_DIR/postgres
 * (src/db/embedded.ts): removing DATA_DIR alone would leave the cluster behind.
 */
export async function removeDataDir(dataDir: string): Promise<void> {
  const link = path.join(dataDir, 'postgres');
  if (existsSync(link) && lstatSync(link).isSymbolicLink()) await rm(realpathSync(link), { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
}

const made: string[] = [];

/** A new directory in the system's temp dir for a Herald's DATA_DIR; removeTempDataDirs() deletes it. */
export async function tempDataDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every directory tempDataDir() made in this test file (call it in the file's `after`). */
export async function removeTempDataDirs(): Promise<void> {
  for (const dir of made.splice(0)) await removeDataDir(dir);
}
