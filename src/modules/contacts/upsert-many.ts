import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from '../../db/client.ts';
import { clientOf } from '../../db/prepared.ts';
import { prefixedId } from '../../db/ids.ts';
import { type NewEvent, recordEvents } from '../events/record.ts';
import { fieldTypesOf, splitCustomData } from './custom-data.ts';
import { checkFieldCapacity, fieldCapacityGuard } from './field-cap.ts';
import { mergedData, passesDataBound, placeholder as $, recordFieldTypes } from './data-sql.ts';
import { normaliseEmail } from './schemas.ts';
import { type ContactRow, contactColumns, toContactRecord } from './sql.ts';
import { type UpsertInput, type UpsertResult, subscriptionEvent, upsertContact } from './service.ts';

/** A row of the `upserted` CTE: the contact as written, its input's position, and what it was before. */
export type UpsertedRow = ContactRow & { ord: number; inserted: boolean; old_subscribed: boolean | null; data_same: boolean };

type PreparedInput = { ord: number; email: string; changes: ReturnType<typeof splitCustomData>; input: UpsertInput & { now: Date } };

// Placeholders of the CTEs: $1 project, $2 the inputs (jsonb), $3 default subscribed; with new
// fields also $4 keys, $5 types, $6 the time they are recorded with.
const capacity = fieldCapacityGuard({ project: $(1), keys: $(4, '::text[]') });
// The data bound (data-sql.ts): when it refuses one input, the statement writes nothing, and the
// callers run each input alone (upsertContact), which gives that one its 422.
const noneRefused = sql`NOT EXISTS (SELECT 1 FROM target WHERE refused)`;
const fields = sql`${capacity.cte}${recordFieldTypes({ project: $(1), keys: $(4, '::text[]'), types: $(5, '::text[]'), now: $(6, '::timestamptz'), guard: sql`${capacity.guard} AND ${noneRefused}` })}`;
const merged = mergedData(sql`o.data`, sql`i.unset_keys`, sql`i.set_data`);

// `old` locks the existing contacts in email order, then `created` inserts the new ones in email
// order; groups, multi-recipient sends and static segment member adds all upsert here, and a
// workflow UPDATE_CONTACT batch locks in email order too (updateContactsData), so none of them
// can deadlock with another on contacts (the one-by-one path locks one). In READ
// COMMITTED, a contact another transaction changed meanwhile is read as that transaction left it.
// `old` looks each email up in the (project, email) index: a LATERAL subquery that locks is never
// turned into a join, and as `email IN (SELECT email FROM input)` the planner, its statistics
// older than a fast-growing project, read all the project's contacts for every group (20,000,
// 17-33 ms, in bench send (a)). Only a contact whose subscription or data changes is written
// (`changed`): one that stays as it was (a known contact tracked with nothing new, the common
// case) gets no new row version, WAL or dead tuple. A contact another transaction created since
// the statement began is left out (`created` does nothing): the caller upserts it one by one.
// `target`'s inner query has OFFSET 0 so it stays a subquery: each row's merge is computed once,
// not once per use of `t.data` (the data bound reads it up to four times).
const upsertCtesText = (withFields: boolean): string => {
  const guard = withFields ? sql` AND ${capacity.guard} AND ${noneRefused}` : sql` AND ${noneRefused}`;
  return new PgDialect().sqlToQuery(sql`
    input AS (
      SELECT * FROM jsonb_to_recordset($2::jsonb)
        AS r(ord int, email text, new_id text, subscribed boolean, set_data jsonb, unset_keys text[], at timestamptz)
    ), old AS MATERIALIZED (
      SELECT c.*
        FROM (SELECT email FROM input ORDER BY email) AS i
       CROSS JOIN LATERAL (
         SELECT ${contactColumns('c')} FROM contacts AS c WHERE c.project_id = $1 AND c.email = i.email FOR NO KEY UPDATE
       ) AS c
    ), target AS (
      SELECT t.*, t.old_id IS NOT NULL AND ${passesDataBound(sql`t.data`, sql`t.old_data`)} AS refused
        FROM (
          SELECT i.ord, i.email, i.new_id, i.at, o.id AS old_id, o.subscribed AS old_subscribed, o.data AS old_data,
                 COALESCE(i.subscribed, o.subscribed, $3::boolean) AS subscribed,
                 CASE WHEN o.id IS NULL THEN i.set_data ELSE ${merged} END AS data
            FROM input AS i LEFT JOIN old AS o ON o.email = i.email
          OFFSET 0
        ) AS t
    )${withFields ? fields : sql``}, created AS (
      INSERT INTO contacts AS c (id, project_id, email, subscribed, data, created_at, updated_at)
      SELECT t.new_id, $1, t.email, t.subscribed, t.data, t.at, t.at FROM target AS t WHERE t.old_id IS NULL${guard} ORDER BY t.email
      ON CONFLICT (project_id, email) DO NOTHING
      RETURNING ${contactColumns('c')}
    ), changed AS (
      UPDATE contacts AS c SET subscribed = t.subscribed, data = t.data, updated_at = t.at
        FROM target AS t
       WHERE c.id = ANY(ARRAY(SELECT old_id FROM target WHERE subscribed <> old_subscribed OR data <> old_data)) AND c.id = t.old_id${guard}
      RETURNING ${contactColumns('c')}
    ), written AS (
      SELECT * FROM created
      UNION ALL SELECT * FROM changed
      UNION ALL SELECT o.* FROM old AS o JOIN target AS t ON t.old_id = o.id
       WHERE t.subscribed = t.old_subscribed AND t.data = t.old_data${guard}
    ), upserted AS (
      SELECT t.ord, w.*, w.id = t.new_id AS inserted, t.old_subscribed, t.old_data IS NOT DISTINCT FROM w.data AS data_same
        FROM written AS w JOIN target AS t ON t.email = w.email
    )`).sql;
};

/**
 * The grouped upsert as CTEs ending in `upserted` (UpsertedRow), in its two shapes (`withFields`:
 * the inputs type new custom fields, which the field cap guards), as constant text: a statement
 * built on it is named and planned once per connection, and Node builds only its parameters
 * (contactsUpsertValues). For upsertContacts, and for a statement that writes more after it
 * (events/track-statement.ts), whose own parameters follow these.
 */
export const CONTACTS_UPSERT_CTES = { plain: upsertCtesText(false), withFields: upsertCtesText(true) } as const;

/**
 * The parameters of CONTACTS_UPSERT_CTES for these inputs, and the shape they need. `fieldKeys` are
 * the custom fields they type: when the statement wrote nothing, the field cap may have held it
 * back (checkFieldCapacity).
 */
export function contactsUpsertValues(
  projectId: string,
  inputs: (UpsertInput & { now: Date })[],
  opts: { defaultSubscribed: boolean },
): { values: unknown[]; withFields: boolean; fieldKeys: string[]; prepared: PreparedInput[] } {
  const prepared = inputs.map((input, ord) => ({ ord, email: normaliseEmail(input.email), changes: splitCustomData(input.data), input }));
  // Field types as the one-by-one path would record them: the first value seen of each key types it.
  const firstValues: Record<string, unknown> = {};
  for (const p of prepared) for (const [k, v] of Object.entries(p.changes.set)) if (!(k in firstValues)) firstValues[k] = v;
  const { keys, types } = fieldTypesOf(firstValues);
  const rows = prepared.map((p) => ({
    ord: p.ord,
    email: p.email,
    new_id: prefixedId('cnt'),
    subscribed: p.input.subscribed ?? null,
    set_data: p.changes.set,
    unset_keys: p.changes.unset,
    at: p.input.now.toISOString(),
  }));
  const values: unknown[] = [projectId, JSON.stringify(rows), opts.defaultSubscribed];
  if (keys.length > 0) values.push(keys, types, rows[0].at);
  return { values, withFields: keys.length > 0, fieldKeys: keys, prepared };
}

/** What one `upserted` row means for its input: the result, and whether its subscription changed (an existing contact's). */
export function upsertedResult(row: UpsertedRow, p: PreparedInput): { result: UpsertResult; subscriptionChanged: boolean } {
  const contact = toContactRecord(row);
  if (row.inserted) return { result: { contact, isNew: true, isUpdate: false, oneOff: p.changes.oneOff }, subscriptionChanged: false };
  const subscriptionChanged = row.old_subscribed !== row.subscribed;
  return { result: { contact, isNew: false, isUpdate: subscriptionChanged || !row.data_same, oneOff: p.changes.oneOff }, subscriptionChanged };
}

const UPSERT_MANY = {
  plain: { name: 'herald_contacts_upsert_many_v4', text: `WITH ${CONTACTS_UPSERT_CTES.plain} SELECT * FROM upserted` },
  withFields: { name: 'herald_contacts_upsert_many_fields_v4', text: `WITH ${CONTACTS_UPSERT_CTES.withFields} SELECT * FROM upserted` },
};

/**
 * `upsertContact` for many contacts of one project in one statement (grouped /v1/track and
 * /v1/send), with the same rules: existing contacts are merged and re-subscribed only by an
 * explicit value (emitting contact.subscribed/unsubscribed, in one INSERT); new ones get
 * `defaultSubscribed` unless the input says otherwise. Emails must be distinct (after
 * normalising). Each input carries its own time. Results are in input order.
 */
export async function upsertContacts(
  db: Db,
  projectId: string,
  inputs: (UpsertInput & { now: Date })[],
  opts: { defaultSubscribed: boolean },
): Promise<UpsertResult[]> {
  const { values, withFields, fieldKeys, prepared } = contactsUpsertValues(projectId, inputs, opts);
  const { rows: written } = await clientOf(db).query<UpsertedRow>({ ...(withFields ? UPSERT_MANY.withFields : UPSERT_MANY.plain), values });
  // Nothing written: the field cap's guard may have held the writes back (the 422 is thrown here).
  if (written.length === 0 && fieldKeys.length > 0) await checkFieldCapacity(db, projectId, fieldKeys);
  const results: UpsertResult[] = new Array(inputs.length);
  const subscriptionEvents: { ord: number; event: NewEvent }[] = [];
  for (const row of written) {
    const { result, subscriptionChanged } = upsertedResult(row, prepared[row.ord]);
    if (subscriptionChanged) subscriptionEvents.push({ ord: row.ord, event: subscriptionEvent(projectId, result.contact, prepared[row.ord].input.now) });
    results[row.ord] = result;
  }
  subscriptionEvents.sort((a, b) => a.ord - b.ord);
  await recordEvents(
    db,
    subscriptionEvents.map((s) => s.event),
  );
  // Left out above: created by another transaction since the statement began (rare), or all of
  // them when the data bound refused one (which throws its 422 here).
  for (const p of prepared) {
    if (!results[p.ord]) results[p.ord] = await upsertContact(db, projectId, p.input, { defaultSubscribed: opts.defaultSubscribed, now: p.input.now });
  }
  return results;
}
