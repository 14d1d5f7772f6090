import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { type SearchIndexOutcome, ensureSearchIndexes } from './search-index.ts';

const MIGRATIONS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary constants shared by every Herald process: only one of them migrates at a time, and
// only one builds the search indexes.
const MIGRATION_LOCK = 728_145_001;
const SEARCH_INDEX_LOCK = 728_145_002;

/**
 * Applies the committed SQL migrations once, even when several processes start together, then
 * makes the search indexes, which a migration's transaction cannot build without holding writes
 * (search-index.ts). Their outcome is returned for the caller to log: Herald runs without them.
 *
 * The indexes are built after the migration lock is released, by whichever process takes its own
 * lock first; the others go on without waiting. `CREATE INDEX CONCURRENTLY` waits for every
 * transaction older than its build to end, and a process queued for the migration lock would
 * be one of those, waiting in turn for the builder: a deadlock, when the build held that lock.
 */
export async function runMigrations(url: string): Promise<{ searchIndexes: SearchIndexOutcome }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await migrate(drizzle(client), { migrationsFolder: MIGRATIONS });
    } finally {
      // A failed unlock must not hide a failed migration (the lock goes with the connection anyway).
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    }
    const { rows } = await client.query<{ mine: boolean }>('SELECT pg_try_advisory_lock($1) AS mine', [SEARCH_INDEX_LOCK]);
    if (!rows[0].mine) return { searchIndexes: { state: 'building elsewhere' } };
    return { searchIndexes: await ensureSearchIndexes(client) };
  } finally {
    await client.end();
  }
}
