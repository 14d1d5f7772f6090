import { type SQL, sql } from 'drizzle-orm';
import { type Database, type Db, withTransaction } from '../../db/client.ts';
import { ApiError, badRequest, conflict } from '../../http/errors.ts';
import { type FieldUsers, usage } from '../usage/service.ts';
import type { FieldType } from './custom-data.ts';
import { isoMs, textArray } from './sql.ts';

/** GET /contacts/fields and the per-field endpoints. */

export type FieldItem = { field: string; type: FieldType; isCustom: boolean; coverage: number };

const STANDARD_FIELDS: { field: string; type: FieldType; column: SQL }[] = [
  { field: 'email', type: 'string', column: sql`c.email` },
  { field: 'subscribed', type: 'boolean', column: sql`c.subscribed` },
  { field: 'createdAt', type: 'date', column: isoMs('c.created_at') },
  { field: 'updatedAt', type: 'date', column: isoMs('c.updated_at') },
];

/** A field as named in the API: a standard field, or `data.<path>` (a bare unknown name means `data.<name>`). */
export type FieldRef = { kind: 'standard'; field: string; column: SQL } | { kind: 'custom'; field: string; key: string; path: string[] };

export function parseFieldRef(name: string): FieldRef {
  const standard = STANDARD_FIELDS.find((f) => f.field === name);
  if (standard) return { kind: 'standard', field: standard.field, column: standard.column };
  const key = name.startsWith('data.') ? name.slice(5) : name;
  const path = key.split('.');
  if (key.length === 0 || key.length > 255 || path.some((p) => p === '')) {
    throw badRequest(`Invalid field name '${name}': use a standard field or data.<key>`, { field: name });
  }
  return { kind: 'custom', field: `data.${key}`, key, path };
}

/** Present and not JSON null. */
const hasPath = (path: string[]): SQL => sql`jsonb_typeof(c.data #> ${textArray(path)}) <> 'null'`;

/** The project's custom field types by key (`plan`, `profile.tier`): what segments and conditions compare with. */
export async function customFieldTypes(db: Db, projectId: string): Promise<Map<string, FieldType>> {
  const { rows } = await db.execute<{ key: string; type: FieldType }>(sql`SELECT key, type FROM contact_fields WHERE project_id = ${projectId}`);
  return new Map(rows.map((r) => [r.key, r.type]));
}

/**
 * Standard fields first (coverage 1), then every typed custom field by name, with its coverage.
 * One scan of the project's contacts reads each contact's data once, entry by entry, and matches
 * the entries against the typed keys: looking each typed key up in each contact instead cost
 * contacts × fields lookups (407,000 contacts and 499 fields: 46 s of PostgreSQL).
 */
export async function listFields(db: Db, projectId: string): Promise<{ fields: FieldItem[] }> {
  const { rows: typed } = await db.execute<{ key: string; type: FieldType }>(
    sql`SELECT key, type FROM contact_fields WHERE project_id = ${projectId} ORDER BY key`,
  );
  const standard = STANDARD_FIELDS.map((f) => ({ field: f.field, type: f.type, isCustom: false, coverage: 1 }));
  if (typed.length === 0) return { fields: standard };
  const { rows: totals } = await db.execute<{ total: number }>(sql`SELECT count(*)::int AS total FROM contacts WHERE project_id = ${projectId}`);
  const { rows: counted } = await db.execute<{ key: string; n: number }>(sql`
    WITH RECURSIVE
      typed AS (SELECT string_to_array(k, '.') AS path FROM unnest(${textArray(typed.map((f) => f.key))}) AS k),
      -- The entries a typed key starts with, and the objects it goes through ('profile' for
      -- 'profile.tier'): the only ones kept and walked into.
      heads AS (SELECT DISTINCT path[1] AS key FROM typed),
      parents AS (SELECT DISTINCT path[1:n] AS path FROM typed, generate_series(1, cardinality(path) - 1) AS n),
      entries(path, value) AS (
        SELECT ARRAY[e.key], e.value
          FROM contacts AS c, jsonb_each(CASE WHEN jsonb_typeof(c.data) = 'object' THEN c.data ELSE '{}' END) AS e
         WHERE c.project_id = ${projectId} AND e.key IN (SELECT key FROM heads)
        UNION ALL
        SELECT parent.path || e.key, e.value
          FROM entries AS parent, jsonb_each(parent.value) AS e
         WHERE jsonb_typeof(parent.value) = 'object' AND parent.path IN (SELECT path FROM parents)
      )
    SELECT array_to_string(entries.path, '.') AS key, count(*)::int AS n
      FROM entries JOIN typed ON typed.path = entries.path
     WHERE jsonb_typeof(entries.value) <> 'null'
     GROUP BY entries.path`);
  const total = totals[0].total;
  const counts = new Map(counted.map((r) => [r.key, r.n]));
  const custom = typed.map((f) => ({
    field: `data.${f.key}`,
    type: f.type,
    isCustom: true,
    coverage: total === 0 ? 0 : (counts.get(f.key) ?? 0) / total,
  }));
  return { fields: [...standard, ...custom] };
}

/** Distinct values of a field, most frequent first; `count` is the number of distinct values in all. */
export async function fieldValues(db: Db, projectId: string, name: string, limit: number): Promise<{ field: string; values: unknown[]; count: number }> {
  const ref = parseFieldRef(name);
  const value = ref.kind === 'standard' ? ref.column : sql`c.data #> ${textArray(ref.path)}`;
  const present = ref.kind === 'standard' ? sql`true` : hasPath(ref.path);
  const { rows } = await db.execute<{ value: unknown; distinct_count: number }>(sql`
    SELECT ${value} AS value, count(*) AS n, count(*) OVER ()::int AS distinct_count
      FROM contacts AS c
     WHERE c.project_id = ${projectId} AND ${present}
     GROUP BY 1
     ORDER BY n DESC, 1 ASC
     LIMIT ${limit}`);
  return { field: ref.field, values: rows.map((r) => r.value), count: rows[0]?.distinct_count ?? 0 };
}

export async function fieldUsage(db: Db, projectId: string, name: string): Promise<FieldUsers & { contactCount: number; canDelete: boolean }> {
  const ref = parseFieldRef(name);
  const present = ref.kind === 'standard' ? sql`true` : hasPath(ref.path);
  const [users, counted] = await Promise.all([
    usage.fieldUsers(db, projectId, ref.field),
    db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM contacts AS c WHERE c.project_id = ${projectId} AND ${present}`),
  ]);
  const used = users.segments.length + users.campaigns.length + users.workflows.length > 0;
  return { ...users, contactCount: counted.rows[0].n, canDelete: ref.kind === 'custom' && !used };
}

/**
 * Removes a custom field from every contact and forgets its type (nested fields under it too).
 * Refused with 409 while a segment, campaign or workflow uses it. Run it in a transaction.
 */
export async function deleteField(database: Database, projectId: string, name: string, now: Date): Promise<{ deletedFrom: number }> {
  const ref = parseFieldRef(name);
  if (ref.kind === 'standard') throw badRequest(`'${ref.field}' is a standard field; only data.* fields can be deleted`);
  // One transaction: nothing can start using the field between the usage check and the delete.
  return withTransaction(database, ({ tx }) => deleteUnusedField(tx, projectId, ref, now));
}

async function deleteUnusedField(db: Db, projectId: string, ref: Extract<FieldRef, { kind: 'custom' }>, now: Date): Promise<{ deletedFrom: number }> {
  const users = await usage.fieldUsers(db, projectId, ref.field);
  if (users.segments.length + users.campaigns.length + users.workflows.length > 0) {
    throw conflict(`Field '${ref.field}' is in use and cannot be deleted`, { field: ref.field, ...users });
  }
  const updated = await db.execute(sql`
    UPDATE contacts AS c SET data = c.data #- ${textArray(ref.path)}, updated_at = ${now.toISOString()}::timestamptz
     WHERE c.project_id = ${projectId} AND c.data #> ${textArray(ref.path)} IS NOT NULL`);
  const forgotten = await db.execute(sql`
    DELETE FROM contact_fields
     WHERE project_id = ${projectId} AND (key = ${ref.key} OR starts_with(key, ${`${ref.key}.`}))`);
  if (!updated.rowCount && !forgotten.rowCount) {
    throw new ApiError(404, 'FIELD_NOT_FOUND', `Field '${ref.field}' not found`, {
      details: { resource: 'field', id: ref.field },
    });
  }
  return { deletedFrom: updated.rowCount ?? 0 };
}
