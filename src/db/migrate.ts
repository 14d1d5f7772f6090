import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { type SearchIndexOutcome, ensureContactSearchIndex } from './search-index.ts';

const MIGRATIONS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary constant shared by every Herald process: only one of them migrates at a time.
const MIGRATION_LOCK = 728_145_001;

/**
 * Applies the committed SQL migrations once, even when several processes start together, then
 * makes the contact search index, which a migration's transaction cannot build without holding
 * writes (search-index.ts). Its outcome is returned for the caller to log: Herald runs without it.
 */
export async function runMigrations(url: string): Promise<{ contactSearchIndex: SearchIndexOutcome }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await migrate(drizzle(client), { migrationsFolder: MIGRATIONS });
    return { contactSearchIndex: await ensureContactSearchIndex(client) };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    await client.end();
  }
}
