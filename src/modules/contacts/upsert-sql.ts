import type pg from 'pg';
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { prefixedId } from '../../db/ids.ts';
import { dataBoundCte, mergedData, passesDataBound, placeholder as $, recordFieldTypes } from './data-sql.ts';
import { fieldCapacityGuard } from './field-cap.ts';
import { contactColumns } from './sql.ts';
import { type DataChanges, fieldTypesOf, splitCustomData } from './custom-data.ts';
import { normaliseEmail } from './schemas.ts';

/**
 * The contact upsert, the hottest statement of the service (POST /contacts, /v1/send, /v1/track,
 * import). It is written as constant SQL text run as a named statement, so PostgreSQL plans it once
 * per connection and Node builds nothing per call but the parameters.
 *
 * One statement: `old` locks the existing row (if any) and is read by the INSERT, so it runs first
 * and gives the exact previous state even under concurrent writers; the INSERT … ON CONFLICT merges
 * data with `mergedData` and `fields` records first-seen types (both from data-sql.ts, the one place
 * those rules are written), with `$n` placeholders so the text stays constant. `bound` refuses a
 * merge that would pass the contact data bound (passesDataBound): then nothing is written, and the
 * contact comes back as it was with `data_refused` (the caller's 422).
 */

// Placeholders: $1 project, $2 email, $3 new id, $4 subscribed (null = keep / default), $5 default
// subscribed, $6 data to set (jsonb), $7 now, $8 keys to unset; with fields: $9 keys, $10 types.
const merged = mergedData(sql.raw('c.data'), $(8, '::text[]'), $(6, '::jsonb'));
// Whether the data bound refuses the write: computed once from `old`; when `old` found nothing
// (another transaction created the contact during this statement), checked on the row itself.
const bound = dataBoundCte($(8, '::text[]'), $(6, '::jsonb'));
const refused = sql`COALESCE((SELECT refused FROM bound), false)`;
// The field cap (field-cap.ts) is checked in the statement: with new keys over the cap it writes nothing.
const capacity = fieldCapacityGuard({ project: $(1), keys: $(9, '::text[]') });
const fields = sql`${capacity.cte}${recordFieldTypes({ project: $(1), keys: $(9, '::text[]'), types: $(10, '::text[]'), now: $(7, '::timestamptz'), guard: sql`${capacity.guard} AND NOT ${refused}` })}`;

// A contact whose subscription and data stay as they are is not written (no new row version, no
// WAL, no dead tuple): the update's WHERE skips it and the last SELECT returns it from `old`. The
// update always runs when `old` found nothing (another transaction created the contact during
// this statement), so a row always comes back unless the field cap held the write back (or the
// data bound did, for a contact created meanwhile: run again, the statement finds it in `old`).
const upsertText = (withFields: boolean) => {
  const guard = withFields ? sql` AND ${capacity.guard}` : sql``;
  return new PgDialect().sqlToQuery(sql`WITH old AS MATERIALIZED (
    SELECT ${contactColumns('c')} FROM contacts AS c WHERE c.project_id = $1 AND c.email = $2 FOR UPDATE
  )${bound}${withFields ? fields : sql``}, written AS (
    INSERT INTO contacts AS c (id, project_id, email, subscribed, data, created_at, updated_at)
    SELECT $3, $1, $2, COALESCE($4::boolean, old.subscribed, $5::boolean), $6::jsonb, $7::timestamptz, $7::timestamptz
      FROM (SELECT 1) AS one LEFT JOIN old ON true ${withFields ? sql`WHERE ${capacity.guard}` : sql``}
    ON CONFLICT (project_id, email) DO UPDATE SET
      subscribed = COALESCE($4::boolean, c.subscribed),
      data = ${merged},
      updated_at = CASE WHEN COALESCE($4::boolean, c.subscribed) <> c.subscribed OR ${merged} <> c.data
                        THEN $7::timestamptz ELSE c.updated_at END
     WHERE (COALESCE($4::boolean, c.subscribed) <> c.subscribed OR ${merged} <> c.data OR NOT EXISTS (SELECT 1 FROM old))
       AND NOT COALESCE((SELECT refused FROM bound), ${passesDataBound(merged, sql`c.data`)})
    RETURNING ${contactColumns('c')}, c.id = $3 AS inserted
  )
  SELECT w.*, EXISTS (SELECT 1 FROM old) AS existed, (SELECT subscribed FROM old) AS old_subscribed,
         (SELECT data FROM old) IS NOT DISTINCT FROM w.data AS data_same, false AS data_refused
    FROM written AS w
  UNION ALL
  SELECT o.id, o.email, o.subscribed, o.data, o.snoozed_until, o.created_at, o.updated_at, false, true, o.subscribed, true, ${refused}
    FROM old AS o WHERE NOT EXISTS (SELECT 1 FROM written)${guard}`).sql;
};

const UPSERT = { name: 'herald_contacts_upsert_v4', text: upsertText(false) };
const UPSERT_WITH_FIELDS = { name: 'herald_contacts_upsert_fields_v5', text: upsertText(true) };

/** The upsert statement for one contact, ready for `client.query` (the benchmark issues it as is). */
export function upsertContactQuery(
  projectId: string,
  input: { email: string; subscribed?: boolean; data?: Record<string, unknown> },
  opts: { defaultSubscribed: boolean; now: Date },
): { query: pg.QueryConfig; newId: string; changes: DataChanges } {
  const changes = splitCustomData(input.data);
  const newId = prefixedId('cnt');
  const values: unknown[] = [
    projectId,
    normaliseEmail(input.email),
    newId,
    input.subscribed ?? null,
    opts.defaultSubscribed,
    JSON.stringify(changes.set),
    opts.now.toISOString(),
    changes.unset,
  ];
  const { keys, types } = fieldTypesOf(changes.set);
  const statement = keys.length > 0 ? UPSERT_WITH_FIELDS : UPSERT;
  if (keys.length > 0) values.push(keys, types);
  return { query: { ...statement, values }, newId, changes };
}
