import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase } from './server.ts';

/** For migration tests: replay the committed migrations up to one, write old-shaped rows, apply the rest. */

const DIR = path.join(import.meta.dirname, '../../src/db/migrations');

/**
 * The migration files in order, split before the first one whose SQL contains `marker` (whatever its
 * name: migrations may be merged); with `until`, `from` stops before the first one containing it.
 */
export async function migrationsSplitAt(marker: string, opts: { until?: string } = {}): Promise<{ before: string[]; from: string[] }> {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.sql')).sort();
  const texts = await Promise.all(files.map((f) => readFile(path.join(DIR, f), 'utf8')));
  const at = texts.findIndex((t) => t.includes(marker));
  assert.ok(at > 0, `a migration after the first contains ${marker}`);
  const end = opts.until === undefined ? files.length : texts.findIndex((t) => t.includes(opts.until!));
  assert.ok(end > at, `a migration after ${files[at]} contains ${opts.until}`);
  return { before: files.slice(0, at), from: files.slice(at, end) };
}

/**
 * Migration 0025, after which a contact's DELETE no longer takes its events by cascade (the service
 * deletes them: contacts/deleted.ts). The migration tests whose checks delete contacts in
 * SQL stop before it: what they check is the counters' migration, under the cascade of its time.
 */
export const EVENTS_WITHOUT_FOREIGN_KEYS = 'ALTER TABLE "events" DROP CONSTRAINT "events_contact_id_contacts_id_fk"';

/** Applies migration files statement by statement in one transaction, as drizzle's migrator does. */
export async function applyMigrations(client: pg.Client, files: string[]): Promise<void> {
  await client.query('BEGIN');
  try {
    for (const file of files) {
      const text = await readFile(path.join(DIR, file), 'utf8');
      for (const statement of text.split('--> statement-breakpoint')) {
        if (statement.trim()) await client.query(statement);
      }
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

/**
 * A migration test on a database of its own: the migrations before the first one containing
 * `marker` (migrationsSplitAt, with `until`), then `seed` writes old-shaped rows, then the rest,
 * then `check`. The client is closed whatever happens; `url` is the database's, for more clients.
 */
export async function acrossMigration(
  marker: string,
  steps: { until?: string; seed: (client: pg.Client, url: string) => Promise<void>; check: (client: pg.Client, url: string) => Promise<void> },
): Promise<void> {
  const url = await createTestDatabase();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { before, from } = await migrationsSplitAt(marker, { until: steps.until });
    await applyMigrations(client, before);
    await steps.seed(client, url);
    await applyMigrations(client, from);
    await steps.check(client, url);
  } finally {
    await client.end();
  }
}

/** Two projects, `prj_a` and `prj_b`, with one contact each (`cnt_a`, `cnt_b`): old-shaped rows to write events for. */
export async function seedTwoProjects(client: pg.Client): Promise<void> {
  await client.query(`INSERT INTO projects (id, name, public_key, webhook_secret) VALUES ('prj_a', 'A', 'pk_a', 'wh_a'), ('prj_b', 'B', 'pk_b', 'wh_b')`);
  await client.query(
    `INSERT INTO contacts (id, project_id, email, subscribed) VALUES ('cnt_a', 'prj_a', 'a@example.org', true), ('cnt_b', 'prj_b', 'b@example.org', true)`,
  );
}

/** The counter rows this client's statements wrote (migrations 0021, 0031) are under its backend's pid, and no other shard but 0 has rows. */
export async function assertWriterShard(client: pg.Client, table: string): Promise<void> {
  const { rows } = await client.query(`SELECT DISTINCT shard FROM ${table} WHERE shard <> 0`);
  assert.deepEqual(
    rows.map((r) => r.shard),
    [(await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid],
    "the writer's rows are under its pid",
  );
}
