import { type SQL, sql } from 'drizzle-orm';
import { type Condition, compileCondition, parseCondition, segmentReferences, validateCondition } from '../../conditions/index.ts';
import { BESIDE_CONDITION_STATEMENT_MS, boundStatementsBesideCondition, conditionRead, requestConditionRead } from '../../conditions/time-bound.ts';
import { answerTimeout } from '../../db/statement-timeout.ts';
import type { AppContext } from '../../context.ts';
import { type Database, type Db, withTransaction } from '../../db/client.ts';
import { type BatchSizes, heldBatchConflict, nextBatchSize, runBatch } from '../../db/batches.ts';
import { NUMBERED_PAGE_BUDGET, assertPageWithinBudget, budgetedPage, dataWithinBudget } from '../../db/page-budget.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { lockKey } from '../../db/key-lock.ts';
import { type SegmentType, segments } from '../../db/schema/segments.ts';
import { ApiError, badRequest, conflict, notFound } from '../../http/errors.ts';
import { asHeavyRead, boundedHeavyReadWhen, heavyReadNote } from '../../http/heavy-reads.ts';
import type { ContactRecord } from '../contacts/service.ts';
import { type ContactRow, contactColumns, isoUs, toContactRecord } from '../contacts/sql.ts';
import { usage } from '../usage/service.ts';
import { forgetTrackedSegments } from './membership.ts';
import { assertRoomForSegment, lockProjectSegments } from './caps.ts';
import type { CreateSegmentInput, SegmentRecord, UpdateSegmentInput } from './schemas.ts';
import { customFieldTypes } from '../contacts/fields.ts';

type SegmentRow = typeof segments.$inferSelect;

export type { SegmentRecord } from './schemas.ts';

export function toSegmentRecord(s: SegmentRow): SegmentRecord {
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    type: s.type,
    condition: s.condition ?? null,
    trackMembership: s.trackMembership,
    memberCount: s.memberCount,
    projectId: s.projectId,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

/** A segment row's columns; `condition` replaces the plain column (the list's budget). */
const segmentColumns = (condition: SQL = sql`condition`): SQL => sql`id, project_id AS "projectId", name, description, type, ${condition},
  condition_bytes AS "conditionBytes", track_membership AS "trackMembership", member_count AS "memberCount", member_count_at AS "memberCountAt",
  compute_cursor AS "computeCursor", created_at AS "createdAt", updated_at AS "updatedAt"`;
const SEGMENT_COLUMNS = segmentColumns();

type RawRow = Omit<SegmentRow, 'createdAt' | 'updatedAt' | 'memberCountAt'> & {
  createdAt: string | Date;
  updatedAt: string | Date;
  memberCountAt: string | Date | null;
};

const fromRaw = (r: RawRow): SegmentRow => ({
  ...r,
  createdAt: new Date(r.createdAt),
  updatedAt: new Date(r.updatedAt),
  memberCountAt: r.memberCountAt === null ? null : new Date(r.memberCountAt),
});

/** The segment row, or null when the id is malformed, unknown or of another project. `lock` takes a row lock (in a transaction). */
export async function findSegmentRow(db: Db, projectId: string, id: string, opts: { lock?: boolean } = {}): Promise<SegmentRow | null> {
  if (!UUID.test(id)) return null;
  const { rows } = await db.execute<RawRow>(
    sql`SELECT ${SEGMENT_COLUMNS} FROM segments WHERE project_id = ${projectId} AND id = ${id}::uuid ${opts.lock ? sql`FOR UPDATE` : sql``}`,
  );
  return rows[0] ? fromRaw(rows[0]) : null;
}

async function getSegmentRow(db: Db, projectId: string, id: string, opts: { lock?: boolean } = {}): Promise<SegmentRow> {
  const row = await findSegmentRow(db, projectId, id, opts);
  if (!row) throw notFound('segment', id);
  return row;
}

/** The segment; 404 SEGMENT_NOT_FOUND when the id is malformed, unknown or of another project. */
export async function getSegment(db: Db, projectId: string, id: string): Promise<SegmentRecord> {
  return toSegmentRecord(await getSegmentRow(db, projectId, id));
}

/** Every segment of the project, newest first (GET /segments is unpaginated). */
/** The size of a condition as PostgreSQL prints it, stored with it: GET /segments sizes its batches without printing them. */
const conditionBytes = (condition: unknown): SQL => (condition === null ? sql`NULL` : sql`octet_length(${JSON.stringify(condition)}::jsonb::text)`);

type ListedRow = Omit<RawRow, 'condition'> & { condition: string | null; sort_value: string; in_page: boolean };

/** Segments a batch of GET /segments reads at most (and about PAGE_DATA_BUDGET of conditions). */
const LIST_BATCH = 100;

/** Stands for the condition in a listed segment's JSON until its stored text replaces it (no stored text holds U+0000). */
const CONDITION_SLOT = '\u0000condition\u0000';
const CONDITION_SLOT_JSON = JSON.stringify(CONDITION_SLOT);

/**
 * GET /segments, newest first and unpaginated (the spec), read in batches of at most LIST_BATCH
 * segments and about PAGE_DATA_BUDGET bytes of conditions, on keyset (created_at, id). Each
 * segment's JSON takes its condition as PostgreSQL prints it, never parsed and written again.
 */
async function* segmentBatches(db: Db, projectId: string): AsyncGenerator<string[]> {
  const order = sql`created_at DESC, id DESC`;
  let after: { at: string; id: string } | null = null;
  for (;;) {
    const keyset: SQL = after ? sql` AND (created_at, id) < (${after.at}::timestamptz, ${after.id}::uuid)` : sql``;
    const { rows } = await db.execute<ListedRow>(sql`
      SELECT ${segmentColumns(dataWithinBudget(sql`condition::text`, sql`s.bytes`, order, 'condition'))}, ${isoUs('created_at')} AS sort_value
        FROM segments CROSS JOIN LATERAL (SELECT coalesce(condition_bytes, octet_length(condition::text), 0) AS bytes OFFSET 0) AS s
       WHERE project_id = ${projectId}${keyset}
       ORDER BY ${order}
       LIMIT ${LIST_BATCH + 1}`);
    const { items, hasMore } = budgetedPage(rows, LIST_BATCH);
    yield items.map((r) => {
      const json = JSON.stringify(toSegmentRecord(fromRaw({ ...r, condition: CONDITION_SLOT })));
      return json.replace(CONDITION_SLOT_JSON, () => r.condition ?? 'null');
    });
    const last: ListedRow | undefined = items.at(-1);
    if (!hasMore || !last) return;
    after = { at: last.sort_value, id: last.id };
  }
}

/** GET /segments of more segments than this, or of more bytes of conditions, is a heavy read. */
export const SEGMENTS_LISTED_AT_ONCE = LIST_BATCH;
export const SEGMENT_CONDITIONS_LISTED_AT_ONCE = 1024 * 1024;

/** How long one statement of a heavy segments list may run: past it, a 503. */
export const SEGMENTS_LIST_STATEMENT_MS = 10_000;

export const HEAVY_SEGMENTS_LIST = heavyReadNote(
  `When the project has more than ${SEGMENTS_LISTED_AT_ONCE} segments, or their conditions more than 1 MB`,
  SEGMENTS_LIST_STATEMENT_MS,
);

/**
 * GET /segments' answer, a JSON array of every segment, read in batches (segmentBatches). A list
 * of more than one batch of segments, or of conditions past 1 MB, is a heavy read
 * (http/heavy-reads.ts): the project's slot and time while it is read. The caps (caps.ts: 1,000
 * segments, 8 MB of conditions) bound it; at the caps, 20 clients asking for it in a loop had held
 * another project's list of 10 contacts for 0.9 s (median), every request.
 */
export async function listSegments(ctx: AppContext, projectId: string): Promise<string> {
  const db = ctx.database.db;
  const read = async (db: Db) => {
    const items: string[] = [];
    for await (const batch of segmentBatches(db, projectId)) items.push(...batch);
    return `[${items.join(',')}]`;
  };
  const { rows } = await db.execute<{ long: boolean }>(sql`
    SELECT count(*) > ${SEGMENTS_LISTED_AT_ONCE} OR coalesce(sum(bytes), 0) > ${SEGMENT_CONDITIONS_LISTED_AT_ONCE} AS long
      FROM (SELECT coalesce(condition_bytes, 0) AS bytes FROM segments WHERE project_id = ${projectId} LIMIT ${SEGMENTS_LISTED_AT_ONCE + 1}) AS s`);
  return boundedHeavyReadWhen(rows[0].long, ctx, projectId, { ms: SEGMENTS_LIST_STATEMENT_MS, what: "Listing this project's segments" }, read);
}

/** The stored condition of a DYNAMIC segment (validated when it was saved). */
export function conditionOf(row: Pick<SegmentRow, 'condition'>): Condition {
  return parseCondition(row.condition);
}

const staticMembership = (segmentId: string): SQL =>
  sql`EXISTS (SELECT 1 FROM segment_members sm WHERE sm.segment_id = ${segmentId}::uuid AND sm.contact_id = c.id)`;

/** Membership of a segment row as SQL over `contacts AS c`. */
export async function membershipSqlOf(db: Db, row: SegmentRow, now: Date): Promise<SQL> {
  if (row.type === 'STATIC') return staticMembership(row.id);
  return compileCondition(db, row.projectId, conditionOf(row), { types: await customFieldTypes(db, row.projectId), now, selfSegmentId: row.id });
}

/** SQL boolean over contacts aliased `c`: membership of the segment (dynamic: its compiled condition; static: the member table). */
export async function segmentMembershipSql(db: Db, projectId: string, segmentId: string, now: Date): Promise<SQL> {
  return membershipSqlOf(db, await getSegmentRow(db, projectId, segmentId), now);
}

/** A request's count of the segment's members: in a heavy-read slot (429 when the project's are taken), bounded in time. */
const countWithin = (ctx: AppContext, row: SegmentRow, now: Date) => requestConditionRead(ctx, row.projectId, (db) => countMembers(db, row, now));

/** How many contacts of the project are in the segment now. */
export async function countMembers(db: Db, row: SegmentRow, now: Date): Promise<number> {
  return countMembersWhere(db, row, await membershipSqlOf(db, row, now));
}

/** countMembers with the segment's membership SQL already made. */
const countMembersWhere = (db: Db, row: SegmentRow, membership: SQL): Promise<number> =>
  row.type === 'STATIC' ? countStaticMembers(db, row.id) : countContactsWhere(db, row.projectId, membership);

/**
 * A static segment's member rows: each is a contact of the segment's project (members.ts adds only
 * those, and a contact's delete takes its rows), so their count is its members' without joining
 * the project's contacts (500,000 members of 1,000,000 contacts: 290 ms joined).
 */
export async function countStaticMembers(db: Db, segmentId: string): Promise<number> {
  const { rows } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM segment_members WHERE segment_id = ${segmentId}::uuid`);
  return rows[0].n;
}

/** How many of the project's contacts satisfy `where` (SQL over `contacts AS c`). */
async function countContactsWhere(db: Db, projectId: string, where: SQL): Promise<number> {
  const { rows } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM contacts AS c WHERE c.project_id = ${projectId} AND ${where}`);
  return rows[0].n;
}

export async function storeMemberCount(db: Db, segmentId: string, count: number, now: Date): Promise<void> {
  await db.execute(sql`UPDATE segments SET member_count = ${count}, member_count_at = ${now.toISOString()}::timestamptz WHERE id = ${segmentId}::uuid`);
}

/**
 * Serialises, until the transaction ends, the writes of the project that add `segment.<id>`
 * references (a PATCHed condition holding any) with their reference check. Checked at once, PATCH
 * A {member of B} and PATCH B {member of A} each passed, seeing the other's old condition, and
 * together stored a cycle, which left both segments unreadable and undeletable. A created segment cannot close a cycle (nothing
 * can reference its new id yet), so POST /segments does not take it.
 */
const lockSegmentReferences = (tx: Db, projectId: string): Promise<void> => lockKey(tx, `segment-references:${projectId}`);

async function checkedCondition(db: Db, projectId: string, raw: unknown, selfSegmentId?: string): Promise<Condition> {
  const condition = parseCondition(raw);
  await validateCondition(db, projectId, condition, { types: await customFieldTypes(db, projectId), selfSegmentId });
  return condition;
}

/**
 * How many contacts of the project a condition matches now, without saving anything: the
 * dashboard's builder shows it as the tree changes. The same validation (400 naming the place)
 * and the same compiled SQL as a saved DYNAMIC segment.
 */
export async function countCondition(ctx: AppContext, projectId: string, raw: unknown): Promise<{ count: number }> {
  const db = ctx.database.db;
  const condition = parseCondition(raw);
  const types = await customFieldTypes(db, projectId); // read once, for the check and the compile
  await validateCondition(db, projectId, condition, { types });
  const where = await compileCondition(db, projectId, condition, { types, now: ctx.clock.now() });
  const count = await requestConditionRead(ctx, projectId, (tx) => countContactsWhere(tx, projectId, where));
  return { count };
}

export async function createSegment(ctx: AppContext, projectId: string, input: CreateSegmentInput): Promise<SegmentRecord> {
  const db = ctx.database.db;
  const condition = input.type === 'DYNAMIC' ? await checkedCondition(db, projectId, input.condition) : null;
  // Checked before the count (a heavy read), and again under the lock as the row is written.
  await assertRoomForSegment(db, projectId, { adding: true, condition });
  const now = ctx.clock.now();
  const values: SegmentRow = {
    id: uuidv7(now.getTime()),
    projectId,
    name: input.name,
    description: input.description ?? null,
    type: input.type,
    condition,
    conditionBytes: null, // written below, by PostgreSQL
    trackMembership: input.trackMembership,
    memberCount: 0,
    memberCountAt: now,
    computeCursor: null,
    createdAt: now,
    updatedAt: now,
  };
  values.memberCount = await countWithin(ctx, values, now);
  const row = await withTransaction(ctx.database, async ({ tx }) => {
    await lockProjectSegments(tx, projectId);
    await assertRoomForSegment(tx, projectId, { adding: true, condition });
    const [inserted] = await tx
      .insert(segments)
      .values({ ...values, conditionBytes: conditionBytes(condition) })
      .returning();
    return inserted;
  });
  if (row.trackMembership) await forgetTrackedSegments(ctx, projectId);
  return toSegmentRecord(row);
}

/**
 * PATCH: name, description, condition (DYNAMIC only), trackMembership. A DYNAMIC segment that stops
 * tracking forgets its computed membership (tracking again starts from nobody: the next compute
 * emits entries for the members). The cached count is refreshed.
 */
export async function updateSegment(ctx: AppContext, projectId: string, id: string, input: UpdateSegmentInput): Promise<SegmentRecord> {
  const current = await getSegmentRow(ctx.database.db, projectId, id);
  if (input.condition !== undefined && current.type !== 'DYNAMIC') {
    throw badRequest('Only DYNAMIC segments have a condition', { segmentId: id, type: current.type });
  }
  const condition = input.condition !== undefined ? await checkedCondition(ctx.database.db, projectId, input.condition, current.id) : undefined;
  // Without the lock: concurrent PATCHes can pass the bytes together, by at most one body each.
  if (condition !== undefined) await assertRoomForSegment(ctx.database.db, projectId, { adding: false, condition, replacing: id });
  const now = ctx.clock.now();
  // The recount is a heavy read: the project's slot is taken before the segment's row is locked. It
  // alone is bounded as a condition's read: waiting for the row (a compute's page holds it) or
  // deleting the members had answered "use fewer or simpler filters".
  return asHeavyRead(ctx.heavyReads, projectId, () =>
    besideConditionOrBusy(() =>
      withTransaction(ctx.database, async ({ tx }) => {
        await boundStatementsBesideCondition(tx);
        if (condition !== undefined && segmentReferences(condition).length > 0) {
          // Checked again under the project's lock, seeing every reference committed before it (a cycle is a 400).
          await lockSegmentReferences(tx, projectId);
          await checkedCondition(tx, projectId, input.condition, current.id);
        }
        const row = await getSegmentRow(tx, projectId, id, { lock: true });
        const next: SegmentRow = {
          ...row,
          name: input.name ?? row.name,
          description: input.description !== undefined ? input.description : row.description,
          condition: condition ?? row.condition,
          trackMembership: input.trackMembership ?? row.trackMembership,
        };
        const changed =
          next.name !== row.name ||
          next.description !== row.description ||
          next.trackMembership !== row.trackMembership ||
          JSON.stringify(next.condition) !== JSON.stringify(row.condition);
        if (changed) next.updatedAt = now;
        // A compute that stopped part-way went by the old condition: the next starts from the first contact.
        const membershipChanged = next.trackMembership !== row.trackMembership || JSON.stringify(next.condition) !== JSON.stringify(row.condition);
        if (row.type === 'DYNAMIC' && row.trackMembership && !next.trackMembership) {
          await tx.execute(sql`DELETE FROM segment_members WHERE segment_id = ${row.id}::uuid`);
        }
        next.memberCount = await conditionRead(tx, () => countMembers(tx, next, now));
        await tx.execute(sql`
      UPDATE segments SET name = ${next.name}, description = ${next.description}, condition = ${next.condition === null ? null : JSON.stringify(next.condition)}::jsonb,
             condition_bytes = ${conditionBytes(next.condition)},
             track_membership = ${next.trackMembership}, member_count = ${next.memberCount},
             member_count_at = ${now.toISOString()}::timestamptz, updated_at = ${next.updatedAt.toISOString()}::timestamptz,
             compute_cursor = CASE WHEN ${membershipChanged} THEN NULL ELSE compute_cursor END
       WHERE id = ${row.id}::uuid`);
        if (next.trackMembership !== row.trackMembership) await forgetTrackedSegments(ctx, projectId);
        return toSegmentRecord(next);
      }),
    ),
  );
}

/** `change` (a PATCH's transaction), its statements beside the condition's read past their bound answered as a busy database. */
const besideConditionOrBusy = <T>(change: () => Promise<T>): Promise<T> =>
  answerTimeout(
    change,
    () =>
      new ApiError(
        503,
        'QUERY_TIMEOUT',
        `Changing this segment took longer than ${BESIDE_CONDITION_STATEMENT_MS / 1000} s (the database is busy, or the segment is being computed): nothing was changed; try again`,
      ),
  );

/**
 * A batch of a segment's members is its next ones by contact id (the primary key), in one short
 * transaction of its own: about 0.4 µs a member (300,000 members went in one 135 ms statement,
 * 1,000,000 in 382 ms), so the size adapts toward `targetMs` from `first`, at most doubling. A
 * segment of at most `first` members is deleted in one transaction, as before, without a slot.
 * Tests lower these.
 */
export const SEGMENT_DELETE_BATCH: BatchSizes = { first: 5000, min: 500, max: 200_000, targetMs: 200 };

/** Rounds of batches at most: members added while one ran (POST /segments/:id/members) are another round. */
const SEGMENT_DELETE_ROUNDS = 3;

/**
 * 409 while anything holds the segment (see usage.segmentHolders), checked first. Members and
 * membership rows go with it.
 *
 * A segment of more than a batch of members takes a slot of ctx.cascadeDeletes (429 past it,
 * before any change) and stops tracking membership in the transaction that checked it is unused,
 * so no recompute adds its members back (with their entry events) meanwhile. Its members then go
 * batch by batch, and the segment row last, checked again. A batch held past BATCH_STATEMENT_MS
 * stops the delete with a 409 counting the members deleted: the segment stays, untracked, and
 * asking again finishes it.
 */
export async function deleteSegment(ctx: AppContext, projectId: string, id: string): Promise<void> {
  let release: (() => void) | undefined;
  const progress = { segmentId: id, deletedMembers: 0 };
  try {
    for (let round = 0; ; round++) {
      const segment = await runBatch(ctx.database, async (db) => {
        const row = await getSegmentRow(db, projectId, id, { lock: true });
        const reasons = await usage.segmentHolders(db, projectId, row.id);
        if (reasons.length > 0) throw conflict(`Segment is in use and cannot be deleted: ${reasons.join('; ')}`, { segmentId: row.id, reasons });
        if (!(await hasMoreMembersThan(db, row.id, SEGMENT_DELETE_BATCH.first))) {
          await db.execute(sql`DELETE FROM segments WHERE id = ${row.id}::uuid`);
          return null;
        }
        release ??= ctx.cascadeDeletes.take(projectId);
        if (row.trackMembership) await db.execute(sql`UPDATE segments SET track_membership = false WHERE id = ${row.id}::uuid`);
        return row;
      }).catch((err: unknown) => {
        throw heldBatchConflict(err, `Deleting segment ${progress.segmentId} stopped after ${progress.deletedMembers} members`, { ...progress });
      });
      if (segment === null) return;
      progress.segmentId = segment.id;
      if (segment.trackMembership) await forgetTrackedSegments(ctx, projectId);
      if (round === SEGMENT_DELETE_ROUNDS) {
        throw conflict(`Segment "${segment.name}" keeps getting new members while it is deleted; ask again`, progress);
      }
      await deleteMembers(ctx.database, segment.id, progress).catch((err: unknown) => {
        throw heldBatchConflict(err, `Deleting segment ${progress.segmentId} stopped after ${progress.deletedMembers} members`, { ...progress });
      });
    }
  } finally {
    release?.();
  }
}

async function hasMoreMembersThan(db: Db, segmentId: string, n: number): Promise<boolean> {
  const { rows } = await db.execute<{ n: number }>(
    sql`SELECT count(*)::int AS n FROM (SELECT 1 FROM segment_members WHERE segment_id = ${segmentId}::uuid LIMIT ${n + 1}) AS x`,
  );
  return rows[0].n > n;
}

/** The segment's members, batch by batch in contact id order, counted in `progress`. */
async function deleteMembers(database: Database, segmentId: string, progress: { deletedMembers: number }): Promise<void> {
  let after = '';
  let size = SEGMENT_DELETE_BATCH.first;
  for (;;) {
    const started = performance.now();
    const batch = await runBatch(database, async (db) => {
      const { rows } = await db.execute<{ picked: number; deleted: number; last: string | null }>(sql`
        WITH picked AS MATERIALIZED (
          SELECT contact_id FROM segment_members WHERE segment_id = ${segmentId}::uuid AND contact_id > ${after} ORDER BY contact_id LIMIT ${size}
        ), deleted AS (
          DELETE FROM segment_members AS m USING picked AS p WHERE m.segment_id = ${segmentId}::uuid AND m.contact_id = p.contact_id RETURNING 1
        )
        SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM deleted)::int AS deleted, (SELECT max(contact_id) FROM picked) AS last`);
      return rows[0];
    });
    progress.deletedMembers += batch.deleted;
    if (batch.last === null || batch.picked < size) return;
    after = batch.last;
    size = nextBatchSize(SEGMENT_DELETE_BATCH, size, performance.now() - started);
  }
}

export type SegmentContacts = { data: ContactRecord[]; total: number; page: number; pageSize: number };

/** GET /segments/:id/contacts: the members now (live for DYNAMIC), newest contacts first. */
export async function listSegmentContacts(ctx: AppContext, projectId: string, id: string, q: { page: number; pageSize: number }): Promise<SegmentContacts> {
  const db = ctx.database.db;
  const row = await getSegmentRow(db, projectId, id);
  const membership = await membershipSqlOf(db, row, ctx.clock.now());
  const where = sql`c.project_id = ${projectId} AND ${membership}`;
  // The page's rows and their sizes of data first; their data only when the page is within the budget.
  const [page, counted] = await requestConditionRead(ctx, projectId, (tx) =>
    Promise.all([
      tx.execute<ContactRow & { bytes: number; page_bytes: number }>(sql`
          WITH page AS MATERIALIZED (
            SELECT c.id, c.created_at, coalesce(c.data_bytes, octet_length(c.data::text)) AS bytes FROM contacts AS c WHERE ${where}
             ORDER BY c.created_at DESC, c.id DESC LIMIT ${q.pageSize} OFFSET ${(q.page - 1) * q.pageSize}
          ), total AS (SELECT coalesce(sum(bytes), 0)::bigint AS bytes FROM page)
          SELECT ${contactColumns('c', sql`CASE WHEN t.bytes <= ${NUMBERED_PAGE_BUDGET} THEN c.data END AS data`)}, p.bytes
            FROM page AS p JOIN contacts AS c ON c.id = p.id CROSS JOIN total AS t
           ORDER BY p.created_at DESC, p.id DESC`),
      countMembersWhere(tx, row, membership),
    ]),
  );
  assertPageWithinBudget(
    page.rows.map((r) => Number(r.bytes)),
    'contacts',
  );
  return { data: page.rows.map(toContactRecord), total: counted, page: q.page, pageSize: q.pageSize };
}

/** POST /segments/:id/refresh: recount and cache; no events, no membership writes. */
export async function refreshSegment(ctx: AppContext, projectId: string, id: string): Promise<{ memberCount: number }> {
  const db = ctx.database.db;
  const row = await getSegmentRow(db, projectId, id);
  const now = ctx.clock.now();
  const memberCount = await countWithin(ctx, row, now);
  await storeMemberCount(db, row.id, memberCount, now);
  return { memberCount };
}

export type { SegmentType };
