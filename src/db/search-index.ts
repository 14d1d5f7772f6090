import type pg from 'pg';

export const CONTACT_SEARCH_INDEX = 'contacts_email_lower_trgm_idx';

/** `building elsewhere`: another starting process holds the build (migrate.ts). */
export type SearchIndexOutcome = { state: 'ready' } | { state: 'building elsewhere' } | { state: 'unavailable'; reason: string };

/**
 * The trigram index on `lower(email)` behind `GET /contacts?search=` (a substring of the email,
 * `LIKE '%…%'`, which no b-tree serves) and the segment conditions on the email (contains,
 * startsWith, endsWith, equals): without it every search reads all of the project's contacts,
 * twice (the page and its `total`), about 200 ms of both cores at 1,000,000 contacts; with it a
 * search for a person's address takes a few milliseconds (docs/decisions.md § Growth).
 *
 * Made after the migrations, outside their transaction: `CONCURRENTLY`, so upgrading a large
 * database does not hold contact writes while the index builds (about 4 s a million contacts
 * here). An index left invalid by an interrupted build is dropped and built again. It needs the
 * pg_trgm extension (PostgreSQL's contrib; trusted, so a database owner may create it). Where it
 * cannot be had, Herald runs without the index: searches give the same answers, by reading the
 * project's contacts as before, and the caller logs the reason.
 */
export async function ensureContactSearchIndex(client: pg.Client): Promise<SearchIndexOutcome> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
  } catch (err) {
    return {
      state: 'unavailable',
      reason: `the pg_trgm extension could not be created (${(err as Error).message}): create it in this database (it ships with PostgreSQL's contrib modules), then restart`,
    };
  }
  const { rows } = await client.query<{ valid: boolean }>(
    `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`,
    [CONTACT_SEARCH_INDEX],
  );
  if (rows[0]?.valid) return { state: 'ready' };
  try {
    if (rows[0]) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${CONTACT_SEARCH_INDEX}`);
    await client.query(`CREATE INDEX CONCURRENTLY ${CONTACT_SEARCH_INDEX} ON contacts USING gin (lower(email) gin_trgm_ops)`);
  } catch (err) {
    // An interrupted build leaves the index invalid (not used, still written): the next start builds it again.
    return { state: 'unavailable', reason: `building ${CONTACT_SEARCH_INDEX} failed (${(err as Error).message}): the next start builds it again` };
  }
  return { state: 'ready' };
}
