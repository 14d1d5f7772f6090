import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { validationError } from '../../http/errors.ts';
import { textArray } from './sql.ts';

/**
 * Typed custom fields a project may have. Every field costs in the fields listing, the segment
 * builder and the condition compiler, so a write that would type more is refused (422) before it
 * changes anything. Concurrent writers may pass it by at most one request's keys each.
 */
export const MAX_CUSTOM_FIELDS = 500;

/** The project's typed fields (`total`) and how many of `keys` are among them (`known`). */
const fieldCounts = (project: SQL, keys: SQL): SQL => sql`
  SELECT count(*)::int AS total, count(*) FILTER (WHERE key = ANY(${keys}))::int AS known
    FROM contact_fields WHERE project_id = ${project}`;

/** Throws a 422 when typing `keys` (the field keys a write introduces or reuses) would pass the cap. */
export async function checkFieldCapacity(db: Db, projectId: string, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  const { rows } = await db.execute<{ total: number; known: number }>(fieldCounts(sql`${projectId}`, textArray(keys)));
  const after = rows[0].total + keys.length - rows[0].known;
  if (after > MAX_CUSTOM_FIELDS) {
    throw validationError([
      {
        field: 'data',
        code: 'too_big',
        message: `A project has at most ${MAX_CUSTOM_FIELDS} custom fields: this write would bring it to ${after} (it has ${rows[0].total}). Delete unused fields with DELETE /contacts/fields/:field or reuse existing ones.`,
      },
    ]);
  }
}

/**
 * checkFieldCapacity inside the statement that writes: a CTE member `, capacity AS (…)` and the
 * guard that holds when typing `keys` (a text[] operand) stays within the cap. The writer makes
 * every write of its statement depend on the guard and, when the statement wrote nothing, calls
 * checkFieldCapacity for the error: the upserts save a round trip.
 */
export function fieldCapacityGuard(p: { project: SQL; keys: SQL }): { cte: SQL; guard: SQL } {
  return {
    cte: sql`, capacity AS (${fieldCounts(p.project, p.keys)})`,
    guard: sql`(SELECT total + cardinality(${p.keys}) - known <= ${sql.raw(String(MAX_CUSTOM_FIELDS))} FROM capacity)`,
  };
}
