import type pg from 'pg';

export const CONTACT_SEARCH_INDEX = 'contacts_email_lower_trgm_idx';
export const SUPPRESSION_SEARCH_INDEX = 'suppressions_email_trgm_idx';

/**
 * The trigram indexes behind the searches for a substring of an address (`LIKE '%…%'`, which no
 * b-tree serves): without one, every search reads all of the project's rows, twice (the page and
 * its `total`), about 200 ms of both cores at 1,000,000 contacts and 600 ms at 1,000,000
 * suppressions; with it a search for a person's address takes a few milliseconds
 * (docs/decisions.md § Growth).
 * - `GET /contacts?search=` and the segment conditions on the email (contains, startsWith,
 *   endsWith, equals) search `lower(email)`;
 * - `GET /suppressions?search=` searches `email`, stored lower-case.
 */
const SEARCH_INDEXES = [
  { name: CONTACT_SEARCH_INDEX, definition: 'contacts USING gin (lower(email) gin_trgm_ops)' },
  { name: SUPPRESSION_SEARCH_INDEX, definition: 'suppressions USING gin (email gin_trgm_ops)' },
] as const;

/** `building elsewhere`: another starting process holds the build (migrate.ts). */
export type SearchIndexOutcome = { state: 'ready' } | { state: 'building elsewhere' } | { state: 'unavailable'; reason: string };

/**
 * Makes the search indexes after the migrations, outside their transaction: `CONCURRENTLY`, so
 * upgrading a large database does not hold writes while an index builds (about 4 s a million
 * contacts here). An index left invalid by an interrupted build is dropped and built again. They
 * need the pg_trgm extension (PostgreSQL's contrib; trusted, so a database owner may create it).
 * Where it cannot be had, Herald runs without them: searches give the same answers, by reading the
 * project's rows as before, and the caller logs the reason. One index failing to build does not
 * keep the next from being built; the reason names each that failed.
 */
export async function ensureSearchIndexes(client: pg.Client): Promise<SearchIndexOutcome> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
  } catch (err) {
    return {
      state: 'unavailable',
      reason: `the pg_trgm extension could not be created (${(err as Error).message}): create it in this database (it ships with PostgreSQL's contrib modules), then restart`,
    };
  }
  const failures: string[] = [];
  for (const index of SEARCH_INDEXES) {
    const failure = await ensureIndex(client, index);
    if (failure) failures.push(failure);
  }
  return failures.length === 0 ? { state: 'ready' } : { state: 'unavailable', reason: failures.join('; ') };
}

/** Builds one index unless a valid one exists; the reason it failed, if it did. */
async function ensureIndex(client: pg.Client, { name, definition }: (typeof SEARCH_INDEXES)[number]): Promise<string | null> {
  const { rows } = await client.query<{ valid: boolean }>(
    `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`,
    [name],
  );
  if (rows[0]?.valid) return null;
  try {
    if (rows[0]) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await client.query(`CREATE INDEX CONCURRENTLY ${name} ON ${definition}`);
  } catch (err) {
    // An interrupted build leaves the index invalid (not used, still written): the next start builds it again.
    return `building ${name} failed (${(err as Error).message}): the next start builds it again`;
  }
  return null;
}
