import { existsSync, lstatSync, realpathSync } from 'node:fs';
import { rm } from 'node:fs/promises';
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
