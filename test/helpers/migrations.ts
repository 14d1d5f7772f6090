import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';

/** For migration tests: replay the committed migrations up to one, write old-shaped rows, apply the rest. */

const DIR = path.join(import.meta.dirname, '../../src/db/migrations');

/** The migration files in order, split before the first one whose SQL contains `marker` (whatever its name: migrations may be merged). */
export async function migrationsSplitAt(marker: string): Promise<{ before: string[]; from: string[] }> {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.sql')).sort();
  const texts = await Promise.all(files.map((f) => readFile(path.join(DIR, f), 'utf8')));
  const at = texts.findIndex((t) => t.includes(marker));
  assert.ok(at > 0, `a migration after the first contains ${marker}`);
  return { before: files.slice(0, at), from: files.slice(at) };
}

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
