import { type SQL, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Database, type Db, withTransaction } from '../../db/client.ts';
import { BATCH_STATEMENT_MS, nextBatchSize, runBatch } from '../../db/batches.ts';
import { isStatementTimeout } from '../../db/statement-timeout.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';
import { ApiError, badRequest, conflict } from '../../http/errors.ts';
import { type FieldUsers, usage } from '../usage/service.ts';
import type { FieldType } from './custom-data.ts';
import { isoMs, isoUs, textArray } from './sql.ts';
import { sumCounter } from '../../db/counter-rows.ts';

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

/** The project's custom field types by key (`plan`, `profile.tier`), in key order: what segments and conditions compare with. */
export async function customFieldTypes(db: Db, projectId: string): Promise<Map<string, FieldType>> {
  const { rows } = await db.execute<{ key: string; type: FieldType }>(sql`SELECT key, type FROM contact_fields WHERE project_id = ${projectId} ORDER BY key`);
  return new Map(rows.map((r) => [r.key, r.type]));
}

/**
 * Past this many contacts, coverage is counted over a sample of the project's contacts (below):
 * listing each contact's entries costs about 2 µs a contact of six fields here (a million
 * contacts: 2.1 s of PostgreSQL), and the dashboard's condition builder waits for this listing.
 */
export const COVERAGE_EXACT_UP_TO = 100_000;

/**
 * Standard fields first (coverage 1), then every typed custom field by name, with its coverage:
 * the share of the project's contacts whose `data` holds a value (not null) at the field's path,
 * walking objects only (not a key named with its dots, not through a list).
 *
 * One pass over the contacts lists the entries of each object a typed key goes through (`data`
 * itself, and `data.profile` for `profile.tier`) and counts them by path; the typed paths' counts
 * are kept. Its cost grows with the entries, not with the typed keys (a project may have 500).
 *
 * Over COVERAGE_EXACT_UP_TO contacts, the pass lists the entries of the contacts whose id hashes
 * into the first of 2^k buckets, between 50,000 and 100,000 of them: a share's standard error is
 * 0.23 % at most. The other contacts' rows are still read, which is cheap next to their entries (a
 * million contacts: 0.75 s instead of 2.1 s).
 */
export async function listFields(db: Db, projectId: string): Promise<{ fields: FieldItem[] }> {
  const fields = await fieldsWithTypes(db, projectId);
  const custom = fields.filter((f) => f.isCustom);
  if (custom.length === 0) return { fields: fields.map((f) => ({ ...f, coverage: 1 })) };
  const total = await sumCounter(db, 'contact_counts', sql`project_id = ${projectId}`);
  const buckets = total > COVERAGE_EXACT_UP_TO ? 2 ** Math.ceil(Math.log2(total / COVERAGE_EXACT_UP_TO)) : 1;
  const counts = await countFieldPaths(
    db,
    projectId,
    custom.map((f) => f.key),
    buckets,
  );
  const coverage = (f: TypedField) => (!f.isCustom ? 1 : counts.read === 0 ? 0 : (counts.byKey.get(f.key) ?? 0) / counts.read);
  return { fields: fields.map((f) => ({ field: f.field, type: f.type, isCustom: f.isCustom, coverage: coverage(f) })) };
}

type TypedField = { field: string; type: FieldType; isCustom: false } | { field: string; type: FieldType; isCustom: true; key: string };

/** The standard fields, then every typed custom field by name: what conditions can compare (no reading of contacts). */
export async function fieldsWithTypes(db: Db, projectId: string): Promise<TypedField[]> {
  const typed = await customFieldTypes(db, projectId);
  return [
    ...STANDARD_FIELDS.map((f) => ({ field: f.field, type: f.type, isCustom: false as const })),
    ...[...typed].map(([key, type]) => ({ field: `data.${key}`, type, isCustom: true as const, key })),
  ];
}

/** How many of the contacts read hold a value at each typed key; `buckets` > 1 reads the contacts of one hash bucket of `buckets`. */
async function countFieldPaths(db: Db, projectId: string, keys: string[], buckets: number): Promise<{ read: number; byKey: Map<string, number> }> {
  const paths = keys.map((k) => k.split('.'));
  // The objects the typed keys' entries sit in: data itself, and each proper prefix of a nested key.
  const parents = new Map<string, string[]>([['', []]]);
  for (const path of paths) for (let n = 1; n < path.length; n++) parents.set(path.slice(0, n).join('.'), path.slice(0, n));
  // `->` by name walks objects only: through a list it is NULL, so a list is never walked into.
  const levels = sql.join(
    [...parents.values()].map((parent) => sql`(${textArray(parent)}, ${sql.join([sql`c.data`, ...parent.map((p) => sql`${p}::text`)], sql` -> `)})`),
    sql`, `,
  );
  // A contact is read when its id hashes into the first of `buckets` buckets: every contact when 1.
  const sampled = buckets === 1 ? sql`true` : sql`(hashtext(c.id) & ${buckets - 1}::int) = 0`;
  // Each contact read also lists one entry in a level of its own whose path starts with NULL, which
  // no object's entries have: its count is the contacts read, in the same scan and snapshot.
  const { rows } = await db.execute<{ key: string | null; n: number }>(sql`
    SELECT wanted.key, counted.n
      FROM (
        SELECT level.path || e.key AS path, count(*)::int AS n
          FROM contacts AS c
               CROSS JOIN LATERAL (VALUES ${levels}, (ARRAY[NULL]::text[], '{"": true}'::jsonb)) AS level(path, value)
               CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(level.value) = 'object' THEN level.value ELSE '{}' END) AS e
         WHERE c.project_id = ${projectId} AND ${sampled} AND jsonb_typeof(e.value) <> 'null'
         GROUP BY 1
      ) AS counted
      JOIN (SELECT string_to_array(k, '.'), k FROM unnest(${textArray(keys)}) AS k UNION ALL SELECT ARRAY[NULL, ''], NULL) AS wanted(path, key)
        ON counted.path = wanted.path`);
  const read = rows.find((r) => r.key === null)?.n ?? 0;
  return { read, byKey: new Map(rows.filter((r) => r.key !== null).map((r) => [r.key as string, r.n])) };
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
 * Field deletes one project may have under way at once, in a process. A delete rewrites every
 * contact of the project that has the field; run as one statement over 300,000 contacts it took
 * 22.8 s of PostgreSQL and held one pooled connection and every row lock it took until the end, so
 * 11 deletes of one project queued on each other's locks for up to 274 s, and 20 would have held
 * the API process's whole pool (DATABASE_POOL_SIZE). Now it runs in short batches (below), one
 * delete of a project at a time.
 */
export const FIELD_DELETES_PER_PROJECT = 1;
/** Field deletes of all projects at once, in a process: each uses one pooled connection while a batch runs. */
export const FIELD_DELETES_PER_PROCESS = 4;

/** The counters of field deletes under way (ctx.fieldDeletes). */
export const fieldDeleteSlots = (): BusySlots =>
  busySlots({
    perProject: FIELD_DELETES_PER_PROJECT,
    perProcess: FIELD_DELETES_PER_PROCESS,
    projectBusy: 'This project already has a field delete under way',
    processBusy: 'The server is busy deleting fields',
  });

/**
 * A batch is the next contacts of the project in (created_at, id) order (the project's
 * contacts_project_created_idx), each batch one short transaction of its own. Its size adapts to
 * keep a batch near `targetMs` (at 300,000 contacts of a dozen small fields, 2,000 contacts take
 * about 150 ms; contacts of 400 KB of data take about 4 ms each), from `first`, at most doubling
 * each time, between `min` and `max` contacts. So a write to a contact of the project (PATCH, an
 * upsert) waits about one batch at most for its row lock, and no connection is held between batches.
 */
export const FIELD_DELETE_BATCH = { first: 100, min: 20, max: 2000, targetMs: 200 };

type CustomField = Extract<FieldRef, { kind: 'custom' }>;
type Cursor = { createdAt: string; id: string };
type BatchResult = { scanned: number; removed: number; last: Cursor | null };

/**
 * Removes a custom field from every contact and forgets its type (nested fields under it too).
 * Refused with 409 while a segment, campaign or workflow uses it, with 429 past
 * FIELD_DELETES_PER_PROJECT (or _PER_PROCESS) deletes under way, before any work.
 *
 * The type is forgotten first, with the usage check, then the contacts are rewritten batch by
 * batch. A contact written while the delete runs: if its batch is still to come (a new contact
 * sorts last), the field is removed from it; if its batch has passed, a value written to the
 * field stays, and the write records the field's type again, so the field is listed (and can be
 * deleted again) rather than left on contacts untyped.
 */
export async function deleteField(ctx: AppContext, projectId: string, name: string): Promise<{ deletedFrom: number }> {
  const ref = parseFieldRef(name);
  if (ref.kind === 'standard') throw badRequest(`'${ref.field}' is a standard field; only data.* fields can be deleted`);
  const release = ctx.fieldDeletes.take(projectId);
  try {
    const now = ctx.clock.now();
    // One transaction: nothing can start using the field between the usage check and forgetting its type.
    const forgotten = await withTransaction(ctx.database, ({ tx }) => forgetUnusedField(tx, projectId, ref));
    const deletedFrom = await removeFromContacts(ctx.database, projectId, ref, now);
    if (deletedFrom === 0 && forgotten === 0) {
      throw new ApiError(404, 'FIELD_NOT_FOUND', `Field '${ref.field}' not found`, { details: { resource: 'field', id: ref.field } });
    }
    return { deletedFrom };
  } finally {
    release();
  }
}

/** Checks no segment, campaign or workflow uses the field (409), then forgets its type; how many types were forgotten. */
async function forgetUnusedField(db: Db, projectId: string, ref: CustomField): Promise<number> {
  const users = await usage.fieldUsers(db, projectId, ref.field);
  if (users.segments.length + users.campaigns.length + users.workflows.length > 0) {
    throw conflict(`Field '${ref.field}' is in use and cannot be deleted`, { field: ref.field, ...users });
  }
  const forgotten = await db.execute(sql`
    DELETE FROM contact_fields
     WHERE project_id = ${projectId} AND (key = ${ref.key} OR starts_with(key, ${`${ref.key}.`}))`);
  return forgotten.rowCount ?? 0;
}

/** Removes the field from the project's contacts batch by batch; how many contacts had it. */
async function removeFromContacts(database: Database, projectId: string, ref: CustomField, now: Date): Promise<number> {
  let after: Cursor | null = null;
  let size = FIELD_DELETE_BATCH.first;
  let removed = 0;
  for (;;) {
    const started = performance.now();
    const batch: BatchResult = await runBatch(database, (db) => removeFromBatch(db, projectId, ref, now, after, size)).catch((err: unknown) => {
      // Most likely a contact another write held past the bound: say how far the delete got.
      if (!isStatementTimeout(err)) throw err;
      throw conflict(
        `Removing '${ref.field}' stopped after ${removed} contacts: a batch of contacts took longer than ${BATCH_STATEMENT_MS / 1000} s (contacts held by other writes?); ask again to finish`,
        { field: ref.field, deletedFrom: removed },
      );
    });
    removed += batch.removed;
    if (batch.last === null || batch.scanned < size) return removed;
    after = batch.last;
    size = nextBatchSize(FIELD_DELETE_BATCH, size, performance.now() - started);
  }
}

/**
 * One batch: the next `size` contacts after the cursor, read from the index alone, and the field
 * removed from those that have it. A contact a concurrent write holds is waited for, then its
 * newest version rewritten (READ COMMITTED), so no write is lost.
 */
async function removeFromBatch(db: Db, projectId: string, ref: CustomField, now: Date, after: Cursor | null, size: number): Promise<BatchResult> {
  const path = textArray(ref.path);
  const pastCursor = after === null ? sql`true` : sql`(c.created_at, c.id) > (${after.createdAt}::timestamptz, ${after.id})`;
  const { rows } = await db.execute<{ scanned: number; removed: number; last_created_at: string | null; last_id: string | null }>(sql`
    WITH scanned AS MATERIALIZED (
      SELECT c.id, c.created_at FROM contacts AS c
       WHERE c.project_id = ${projectId} AND ${pastCursor}
       ORDER BY c.created_at, c.id
       LIMIT ${size}
    ),
    updated AS (
      UPDATE contacts AS c SET data = c.data #- ${path}, updated_at = ${now.toISOString()}::timestamptz
        FROM scanned AS s
       WHERE c.id = s.id AND c.project_id = ${projectId} AND c.data #> ${path} IS NOT NULL
      RETURNING c.id
    ),
    last AS (SELECT s.id, s.created_at FROM scanned AS s ORDER BY s.created_at DESC, s.id DESC LIMIT 1)
    SELECT (SELECT count(*) FROM scanned)::int AS scanned, (SELECT count(*) FROM updated)::int AS removed,
           (SELECT ${isoUs('created_at')} FROM last) AS last_created_at, (SELECT id FROM last) AS last_id`);
  const row = rows[0];
  const last = row.last_created_at !== null && row.last_id !== null ? { createdAt: row.last_created_at, id: row.last_id } : null;
  return { scanned: row.scanned, removed: row.removed, last };
}
