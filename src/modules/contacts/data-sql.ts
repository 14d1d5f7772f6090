import { type SQL, sql } from 'drizzle-orm';
import { validationError } from '../../http/errors.ts';
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
 * A contact's `data` is at most this many bytes of JSON as PostgreSQL prints it (`data::text`: a
 * space after each `,` and `:`, numbers in plain notation), whatever the writes that built it. One
 * request's `data` (DATA_LIMITS, 256 KB compact) prints as at most 384 KB, so it always fits a new
 * contact; a read of a contact stays a few milliseconds.
 */
export const MAX_CONTACT_DATA_BYTES = 1024 * 1024;

/**
 * More bytes of printed JSON than any jsonb byte gives: the worst case is a number (5e-324, 326
 * characters in plain notation, takes 16 bytes of jsonb in an array: 20.5 per byte), then a
 * control character (1 byte, 6 printed). So data of at most MAX_CONTACT_DATA_BYTES / 40 bytes of
 * jsonb (a size read, not computed) is within the bound without printing it.
 */
export const MAX_PRINTED_PER_JSONB_BYTE = 40;

/**
 * Holds when a write that turns a contact's `current` data into `merged` passes the bound: it
 * changes the data, and the result is over MAX_CONTACT_DATA_BYTES and larger than `current` (so a
 * contact stored over it before the bound existed can still shrink). Every writer checks it in the
 * statement that merges, as concurrent writes merge in SQL. Only a write that changes data of more
 * than 26 KB of jsonb prints it: the hot writes (small data, or nothing new) compare and stop.
 */
export const passesDataBound = (merged: SQL, current: SQL): SQL => {
  const max = sql.raw(String(MAX_CONTACT_DATA_BYTES));
  const smallEnough = sql.raw(String(Math.floor(MAX_CONTACT_DATA_BYTES / MAX_PRINTED_PER_JSONB_BYTE)));
  return sql`(${merged} <> ${current} AND pg_column_size(${merged}) > ${smallEnough}
    AND octet_length((${merged})::text) > ${max} AND octet_length((${merged})::text) > octet_length((${current})::text))`;
};

/**
 * A CTE member `, bound AS (id, refused)`: for each contact of the CTE `old` (columns `id`, `data`),
 * whether merging `unset` and `set` into its data is refused (passesDataBound), the merge computed
 * once (OFFSET 0 keeps the subquery from being pulled up, which would compute it once per use).
 */
export const dataBoundCte = (unset: SQL, set: SQL): SQL => sql`, bound AS (
    SELECT o.id, ${passesDataBound(sql`m.data`, sql`o.data`)} AS refused
      FROM old AS o CROSS JOIN LATERAL (SELECT ${mergedData(sql`o.data`, unset, set)} AS data OFFSET 0) AS m
  )`;

/** The 422 of a write passesDataBound refused (it changed nothing). */
export const contactDataTooBig = () =>
  validationError([
    {
      field: 'data',
      code: 'too_big',
      message: `A contact's data can be at most ${MAX_CONTACT_DATA_BYTES / 1024 / 1024} MB as JSON, and this write would take it over: delete keys you no longer need (set them to null) or send large values one-off ({ "value": …, "persistent": false }).`,
    },
  ]);

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
