import { type SQL, sql } from 'drizzle-orm';
import { fieldTypesOf } from './custom-data.ts';
import { textArray } from './sql.ts';

/**
 * The two SQL rules of custom data, written once for every writer of `contacts.data` (the upsert,
 * PATCH and the CSV import): how new values merge into a contact's `data`, and how a field's type
 * is recorded the first time it is seen. Each piece takes its operands as SQL, so the hot upsert
 * can pass `$n` placeholders and keep one constant, named statement.
 */

/** The statement parameter `$n` (with an optional cast) as an operand, for the upserts' constant text. */
export const placeholder = (n: number, cast = ''): SQL => sql.raw(`$${n}${cast}`);

/** `current` with the `unset` keys removed and `set` written over it (top-level keys; splitCustomData's rules). */
export const mergedData = (current: SQL, unset: SQL, set: SQL): SQL => sql`((${current} - ${unset}) || ${set})`;

/**
 * A CTE member `, fields AS (…)` that records first-seen field types (keys sorted, so concurrent
 * writers lock field rows in one order); only when `guard` holds, if given.
 */
export const recordFieldTypes = (p: { project: SQL; keys: SQL; types: SQL; now: SQL; guard?: SQL }): SQL => sql`, fields AS (
    INSERT INTO contact_fields (project_id, key, type, created_at)
    SELECT ${p.project}, u.k, u.t, ${p.now}
      FROM unnest(${p.keys}, ${p.types}) AS u(k, t)
     ${p.guard ? sql`WHERE ${p.guard}` : sql``}
    ON CONFLICT DO NOTHING)`;

/** `recordFieldTypes` for the values of `set` (nothing when it has no keys), as parameters. */
export function recordFieldTypesOf(projectId: string, set: Record<string, unknown>, now: string, guard?: SQL): SQL {
  const { keys, types } = fieldTypesOf(set);
  if (keys.length === 0) return sql``;
  return recordFieldTypes({ project: sql`${projectId}`, keys: textArray(keys), types: textArray(types), now: sql`${now}::timestamptz`, guard });
}
