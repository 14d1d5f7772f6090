import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import type { segments } from '../../db/schema/segments.ts';
import { ApiError, badRequest, notFound } from '../../http/errors.ts';
import { loggableError } from '../../loggable-error.ts';
import { recordEvents } from '../events/record.ts';
import { countMembers, findSegmentRow, membershipSqlOf, storeMemberCount } from './service.ts';
import { isoUs, textArray } from '../contacts/sql.ts';
import {
  BESIDE_CONDITION_STATEMENT_MS,
  CONTACT_CONDITION_STATEMENT_MS,
  boundStatementsBesideCondition,
  conditionRead,
  withConditionTimeout,
} from '../../conditions/time-bound.ts';
import { isStatementTimeout, setStatementTimeout } from '../../db/statement-timeout.ts';
import { pgErrorCode } from '../../db/pg-error.ts';

/**
 * Tracked membership (`trackMembership`): the computed members of a DYNAMIC segment are kept in
 * segment_members, and every change is an event `segment.<slug>.entry` / `.exit` written through
 * recordEvent, like any tracked event. A change is made, and its event written, by exactly one
 * writer: the row insert or delete that made it (ON CONFLICT DO NOTHING / DELETE … RETURNING), under
 * the segment's row lock, so a full compute and a per-contact re-evaluation never emit one twice.
 */

type SegmentRow = typeof segments.$inferSelect;

/** decisions.md § 6: lower-case; keep letters, digits, `_`, spaces and `-`; spaces become `-`; runs of `-` collapse; trim `-`. */
export function segmentSlug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\s-]/gu, '')
    .replace(/\s/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '');
}

/** `segment.<slug>.entry|exit`; a name with nothing left for a slug uses the segment id. */
export function membershipEventName(segment: { id: string; name: string }, change: 'entry' | 'exit'): string {
  return `segment.${segmentSlug(segment.name) || segment.id}.${change}`;
}

/** Writes the entry/exit events of membership changes (in the caller's transaction). */
export async function recordMembershipEvents(
  db: Db,
  segment: Pick<SegmentRow, 'id' | 'name' | 'projectId'>,
  changes: { entered: string[]; exited: string[] },
  now: Date,
): Promise<void> {
  const data = { segmentId: segment.id, segmentName: segment.name };
  const rows = (['entry', 'exit'] as const).flatMap((change) =>
    (change === 'entry' ? changes.entered : changes.exited).map((contactId) => ({
      projectId: segment.projectId,
      contactId,
      name: membershipEventName(segment, change),
      data,
      createdAt: now,
    })),
  );
  await recordEvents(db, rows);
}

/** Where a compute stands: the last contact of its last page, in (created_at, id) order, as an exact timestamp string. */
type PageCursor = { at: string; id: string } | null;

/**
 * Contacts a compute reads and writes per transaction. One statement over a million contacts
 * passed the condition bound (10 s) by writing alone, so a big tracked segment could never be
 * computed, and its segment row stayed locked for the whole compute.
 */
const COMPUTE_BATCH = 10_000;
/** How long POST /segments/:id/compute works before it answers (under common 30 s proxy timeouts). */
const COMPUTE_REQUEST_BUDGET_MS = 25_000;
/** How long the 5-minute job works on one segment. */
const COMPUTE_JOB_BUDGET_MS = 60_000;

/** Which of a page's contacts should enter the segment and which should leave it, and the page's last contact when it was full (more may follow). */
type PageChanges = { enter: string[]; exit: string[]; last: PageCursor };

/**
 * Reads the contacts `pick` names (one contact, or the page after a cursor) against a tracked
 * DYNAMIC segment: the one statement over its condition. It writes nothing, so a caller can bound
 * it apart from the writes (applyChanges), and a page cancelled for its condition is told from one
 * cancelled for its writes.
 */
async function pageChanges(tx: Db, row: SegmentRow, pick: { contactId: string } | { after: PageCursor }, now: Date): Promise<PageChanges> {
  const where = await membershipSqlOf(tx, row, now);
  const from =
    'contactId' in pick
      ? sql`AND c.id = ${pick.contactId}`
      : pick.after
        ? sql`AND (c.created_at, c.id) > (${pick.after.at}::timestamptz, ${pick.after.id})`
        : sql``;
  const { rows } = await tx.execute<{ change: 'entry' | 'exit' | 'last'; contact_id: string; at: string | null }>(sql`
    WITH page AS MATERIALIZED (
      SELECT c.id, c.created_at, COALESCE((${where}), false) AS matches
        FROM contacts AS c
       WHERE c.project_id = ${row.projectId} ${from}
       ORDER BY c.created_at, c.id
       LIMIT ${COMPUTE_BATCH}
    ), last AS (
      SELECT id, ${isoUs('created_at')} AS at FROM page ORDER BY created_at DESC, id DESC LIMIT 1
    )
    SELECT CASE WHEN page.matches THEN 'entry' ELSE 'exit' END AS change, page.id AS contact_id, NULL AS at
      FROM page
      -- One index probe a contact (LATERAL … LIMIT 1 is never made a hash): as a join or EXISTS, the planner
      -- read all the segment's members for every page, on statistics that lag a first compute.
      LEFT JOIN LATERAL (
        SELECT true AS member FROM segment_members AS m WHERE m.segment_id = ${row.id}::uuid AND m.contact_id = page.id LIMIT 1
      ) AS m ON true
     WHERE page.matches <> (m.member IS NOT NULL)
    UNION ALL SELECT 'last', id, at FROM last WHERE (SELECT count(*) FROM page) = ${COMPUTE_BATCH}`);
  const lastRow = rows.find((r) => r.change === 'last');
  return {
    enter: rows.filter((r) => r.change === 'entry').map((r) => r.contact_id),
    exit: rows.filter((r) => r.change === 'exit').map((r) => r.contact_id),
    last: lastRow ? { at: lastRow.at!, id: lastRow.contact_id } : null,
  };
}

/**
 * Makes the changes pageChanges read, and records their entry and exit events. Each change is made
 * by the insert or delete that made it, under the segment's row lock the caller holds, so no change
 * is made, or its event written, twice. A contact deleted since the read fails the insert (23503).
 */
async function applyChanges(tx: Db, row: SegmentRow, changes: PageChanges, now: Date): Promise<{ entered: string[]; exited: string[] }> {
  if (changes.enter.length === 0 && changes.exit.length === 0) return { entered: [], exited: [] };
  const { rows } = await tx.execute<{ change: 'entry' | 'exit'; contact_id: string }>(sql`
    WITH ins AS (
      INSERT INTO segment_members (segment_id, contact_id, created_at)
      SELECT ${row.id}::uuid, c.id, ${now.toISOString()}::timestamptz
        FROM unnest(${textArray(changes.enter)}) AS c(id)
      ON CONFLICT DO NOTHING
      RETURNING contact_id
    ), del AS (
      DELETE FROM segment_members
       WHERE segment_id = ${row.id}::uuid AND contact_id = ANY(${textArray(changes.exit)})
      RETURNING contact_id
    )
    SELECT 'entry' AS change, contact_id FROM ins
    UNION ALL SELECT 'exit', contact_id FROM del`);
  const made = {
    entered: rows.filter((r) => r.change === 'entry').map((r) => r.contact_id),
    exited: rows.filter((r) => r.change === 'exit').map((r) => r.contact_id),
  };
  await recordMembershipEvents(tx, row, made, now);
  return made;
}

/**
 * POST /segments/:id/compute, and the 5-minute job: recomputes a tracked segment's membership and
 * fires entry/exit events. A STATIC segment's members change only through its members endpoints,
 * so it has nothing to recompute. 400 when the segment does not track membership.
 *
 * The contacts are taken COMPUTE_BATCH at a time, each page in a transaction of its own under the
 * segment's row lock, its changes, their events and the segment's `compute_cursor` (the page's
 * last contact) committed together (so each change is still made, and its event written, once).
 * Past `budgetMs` the compute stops after a page with 503 QUERY_TIMEOUT: what it did is kept, and
 * the next compute (the 5-minute job's, say) goes on after the cursor. One that reaches the last
 * page clears it, so the next starts from the first. Before the cursor, a compute past its budget
 * started again from the first page, and reading the pages already in line (8.4 s a million)
 * left less of each budget for the rest: past about 3,000,000 members a request never finished.
 */
export async function computeSegment(
  ctx: AppContext,
  projectId: string,
  id: string,
  budgetMs = COMPUTE_REQUEST_BUDGET_MS,
): Promise<{ added: number; removed: number; total: number }> {
  const now = ctx.clock.now();
  const ends = Date.now() + budgetMs;
  const done = { added: 0, removed: 0 };
  // Only the condition's reads are the condition's (400): a lock waited for, or writes slowed by a
  // busy database, had answered "use fewer or simpler filters" for a one-filter segment.
  const busy = (err: unknown) => {
    throw isStatementTimeout(err) ? computeBusy(done) : err;
  };
  for (;;) {
    // Each change writes a membership row and an event (about 2 KB of WAL): a compute of a million
    // contacts writes gigabytes from a request of a few bytes, which the disk floor's buckets do not
    // see. Below twice the floor it waits, as a campaign's fan-out does; its cursor keeps its place.
    if (ctx.diskRoom.level() !== 'ok') throw computeWaitsForRoom(done);
    const page = await computePage(ctx, projectId, id, now).catch(busy);
    done.added += page.entered.length;
    done.removed += page.exited.length;
    if (!page.last) break;
    if (Date.now() >= ends) throw computeUnfinished(budgetMs, done);
  }
  const total = await withTransaction(ctx.database, async ({ tx }) => {
    await boundStatementsBesideCondition(tx);
    const row = await trackedSegmentRow(tx, projectId, id);
    const n = await conditionRead(tx, () => countMembers(tx, row, now));
    await storeMemberCount(tx, row.id, n, now);
    return n;
  }).catch(busy);
  return { ...done, total };
}

/**
 * One page of a compute, in a transaction of its own: the condition's read under its bound, the
 * rest (the segment's row lock, the writes) under BESIDE_CONDITION_STATEMENT_MS. A contact deleted
 * between the read and the insert fails the insert (its foreign key): the page is read again, and
 * the contact is no longer on it.
 */
async function computePage(
  ctx: AppContext,
  projectId: string,
  id: string,
  now: Date,
  tries = 3,
): Promise<{ entered: string[]; exited: string[]; last: PageCursor }> {
  try {
    return await withTransaction(ctx.database, async ({ tx }) => {
      await boundStatementsBesideCondition(tx);
      const row = await trackedSegmentRow(tx, projectId, id);
      if (row.type !== 'DYNAMIC') return { entered: [], exited: [], last: null };
      const changes = await conditionRead(tx, () => pageChanges(tx, row, { after: row.computeCursor ?? null }, now));
      const made = await applyChanges(tx, row, changes, now);
      // Where the next page, or the next compute should this one stop, starts: committed with the page.
      await tx.execute(sql`UPDATE segments SET compute_cursor = ${changes.last ? JSON.stringify(changes.last) : null}::jsonb WHERE id = ${row.id}::uuid`);
      return { ...made, last: changes.last };
    });
  } catch (err) {
    if (!isContactGone(err) || tries <= 1) throw err;
    return computePage(ctx, projectId, id, now, tries - 1);
  }
}

/** A member inserted for a contact deleted since its page was read (segment_members' foreign key). */
const isContactGone = (err: unknown): boolean => pgErrorCode(err) === '23503';

/** The segment, locked for the rest of the transaction; 404 when gone, 400 when it does not track membership. */
async function trackedSegmentRow(tx: Db, projectId: string, id: string): Promise<SegmentRow> {
  const row = await findSegmentRow(tx, projectId, id, { lock: true });
  if (!row) throw notFound('segment', id);
  if (!row.trackMembership) throw badRequest('compute needs a segment with trackMembership enabled; use refresh to recount', { segmentId: id });
  return row;
}

const computeBusy = (done: { added: number; removed: number }) =>
  new ApiError(
    503,
    'QUERY_TIMEOUT',
    `Writing this segment's membership changes took longer than ${BESIDE_CONDITION_STATEMENT_MS / 1000} s (the database is busy, or a change waited for a lock): the ${done.added} additions and ${done.removed} removals made before are kept, and the next compute (every 5 minutes) goes on`,
    { details: done },
  );

const computeWaitsForRoom = (done: { added: number; removed: number }) =>
  new ApiError(
    507,
    'INSUFFICIENT_STORAGE',
    `The server's database disk is filling up: membership computes, which write a row and an event for every change, wait until it has room again (DATABASE_MIN_FREE_MB). ${
      done.added + done.removed > 0
        ? `The ${done.added} additions and ${done.removed} removals made before are kept, and the next compute goes on after them`
        : "The segment's members are as last computed"
    }`,
    { details: done },
  );

const computeUnfinished = (budgetMs: number, done: { added: number; removed: number }) =>
  new ApiError(
    503,
    'QUERY_TIMEOUT',
    `Computing this segment's membership took longer than ${budgetMs / 1000} s: the ${done.added} additions and ${done.removed} removals made so far are kept, and the next compute (every 5 minutes) goes on`,
    { details: done },
  );

/**
 * How a re-evaluation job is bounded. The quick lane, every project's jobs together: a job that
 * outruns `statementMs` on a segment, or `budgetMs` in all, stops and is handed to the slow lane.
 * The slow lane, one job at a time per process: a segment past `statementMs` is skipped for the
 * contact (logged by id), and the segments not reached by `budgetMs` wait for the 5-minute
 * recompute, which brings every tracked segment in line.
 */
export type ReevaluationBounds = { budgetMs: number; statementMs: number; outrun: 'hand over' | 'skip' };
export const QUICK_REEVALUATION: ReevaluationBounds = { budgetMs: 1_000, statementMs: 1_000, outrun: 'hand over' };
export const SLOW_REEVALUATION: ReevaluationBounds = { budgetMs: 5_000, statementMs: CONTACT_CONDITION_STATEMENT_MS, outrun: 'skip' };

/**
 * Re-evaluates every tracked DYNAMIC segment of the project for one contact (after its data or
 * events changed), one segment per transaction. The cached count moves with each change. Answers
 * 'outran' when the quick lane's bounds stopped it (its segments done so far are in line; doing
 * them again writes nothing).
 *
 * Bounded, as the jobs of every project wait on these workers. Before, a segment of 500 filters
 * counting a million events each of a contact that has them was read for as long as PostgreSQL
 * took, and ten such jobs held a worker's batch for everyone.
 */
export async function reevaluateContact(
  ctx: AppContext,
  projectId: string,
  contactId: string,
  bounds: ReevaluationBounds = SLOW_REEVALUATION,
): Promise<'done' | 'outran'> {
  const { rows } = await ctx.database.db.execute<{ id: string }>(sql`
    SELECT id FROM segments WHERE project_id = ${projectId} AND track_membership AND type = 'DYNAMIC' ORDER BY created_at, id`);
  const now = ctx.clock.now();
  const ends = Date.now() + bounds.budgetMs;
  for (const [i, { id }] of rows.entries()) {
    if (i > 0 && Date.now() >= ends) {
      if (bounds.outrun === 'hand over') return 'outran';
      ctx.log.warn({ projectId, segmentsLeft: rows.length - i }, 'segment re-evaluation stopped at its budget: the rest wait for the 5-minute recompute');
      return 'done';
    }
    const outran = await withTransaction(ctx.database, async ({ tx }) => {
      await setStatementTimeout(tx, bounds.statementMs);
      const row = await findSegmentRow(tx, projectId, id, { lock: true });
      if (!row || !row.trackMembership || row.type !== 'DYNAMIC') return;
      const changes = await applyChanges(tx, row, await pageChanges(tx, row, { contactId }, now), now);
      const delta = changes.entered.length - changes.exited.length;
      if (delta !== 0) await tx.execute(sql`UPDATE segments SET member_count = GREATEST(member_count + ${delta}, 0) WHERE id = ${row.id}::uuid`);
    }).then(
      () => false,
      (err: unknown) => {
        // A stored condition the engine refuses (one past a bound added since it was saved) fails the
        // same way every time, and one past the time bound would cost the same again: skip that
        // segment, keep the others (retrying would not help).
        if (isStatementTimeout(err)) {
          if (bounds.outrun === 'hand over') return true;
          ctx.log.warn({ projectId, segmentId: id }, `segment skipped for a contact: its condition took longer than ${bounds.statementMs / 1000} s`);
          return false;
        }
        if (isContactGone(err)) return false; // deleted since it was read: nothing left to bring in line
        if (!isConditionError(err)) throw err;
        ctx.log.warn({ error: loggableError(err), projectId, segmentId: id }, 'segment skipped: its condition cannot be evaluated');
        return false;
      },
    );
    if (outran) return 'outran';
  }
  return 'done';
}

const isConditionError = (err: unknown): err is ApiError => err instanceof ApiError && err.statusCode === 400;

export const REEVALUATE_QUEUE = 'segments-reevaluate-contact';

/** Changes within this window are folded into one re-evaluation of the contact. */
const DEBOUNCE_MS = 500;

/**
 * Whether the project has a tracked DYNAMIC segment (cached for 5 s, forgotten when one changes).
 * Inside a transaction, pass its `client`: the lookup then needs no second connection, which a
 * pool whose every connection is such a transaction could not give.
 */
export async function hasTrackedSegments(ctx: AppContext, projectId: string, client?: pg.PoolClient): Promise<boolean> {
  const load = async () => {
    const { rows } = await (client ? drizzle(client) : ctx.database.db).execute<{ tracked: boolean }>(
      sql`SELECT EXISTS (SELECT 1 FROM segments WHERE project_id = ${projectId} AND track_membership AND type = 'DYNAMIC') AS tracked`,
    );
    return rows[0].tracked;
  };
  try {
    return await ctx.caches.trackedSegments.getOrLoad(projectId, 'tracked', load);
  } catch {
    // The shared lookup ran on the connection of whichever request asked first: its failure (that
    // transaction aborted, or its connection broke) is not this request's. Ask again on our own.
    return load();
  }
}

/** Forget the cached answer in every process (a tracked segment was created or changed). */
export async function forgetTrackedSegments(ctx: AppContext, projectId: string): Promise<void> {
  await ctx.keys.notifyChanged(projectId);
}

/**
 * Schedules the re-evaluation of tracked segments for a contact whose data or events changed:
 * a job that runs within about a second, one per contact at a time (later calls while one is
 * waiting fold into it). Pass the transaction's `client` so it is enqueued only if the change
 * commits. Nothing is enqueued when the project has no tracked DYNAMIC segment.
 */
export async function scheduleSegmentReevaluation(ctx: AppContext, projectId: string, contactId: string, client?: pg.PoolClient): Promise<void> {
  if (!(await hasTrackedSegments(ctx, projectId, client))) return;
  await ctx.jobs.send(
    REEVALUATE_QUEUE,
    { projectId, contactId },
    { client, singletonKey: `${projectId}:${contactId}`, startAfter: new Date(Date.now() + DEBOUNCE_MS) },
  );
}

/** How long one run of the 5-minute job may take in all, and on one project's segments. */
export type RecomputeBudget = { runMs: number; projectMs: number };
const RECOMPUTE_BUDGET: RecomputeBudget = { runMs: 4 * 60_000, projectMs: 30_000 };

/**
 * The 5-minute job: recompute every tracked segment (time-based filters move on their own) and
 * recount all others. A segment that fails (a stored condition past the engine's bounds answers
 * 400 before anything is built; one whose statements pass CONDITION_STATEMENT_MS is cancelled) is
 * logged by id, without its condition or data, and skipped.
 *
 * One tenant's slow segments cannot hold the job for everyone: each project gets at most
 * `projectMs` of a run past its first segment (its stalest segments first, so the rest come next
 * time), the run stops at `runMs` (before the next one is due), and the projects are taken from a random place in
 * their order each run, so none is always last.
 */
export async function recomputeAllSegments(ctx: AppContext, budget: RecomputeBudget = RECOMPUTE_BUDGET): Promise<void> {
  const runEnds = Date.now() + budget.runMs;
  const { rows } = await ctx.database.db.execute<{ id: string; project_id: string; tracked: boolean }>(sql`
    SELECT id, project_id, track_membership AS tracked FROM segments
     ORDER BY project_id, member_count_at NULLS FIRST, created_at, id`);
  const byProject = [...Map.groupBy(rows, (s) => s.project_id).values()];
  const first = Math.floor(Math.random() * byProject.length);
  for (const projectSegments of [...byProject.slice(first), ...byProject.slice(0, first)]) {
    const projectEnds = Math.min(runEnds, Date.now() + budget.projectMs);
    // At least one segment of each project a run reaches: every project makes progress.
    for (const s of projectSegments) {
      await recomputeOne(ctx, s);
      if (Date.now() >= projectEnds) break;
    }
    if (Date.now() >= runEnds) return;
  }
}

async function recomputeOne(ctx: AppContext, s: { id: string; project_id: string; tracked: boolean }): Promise<void> {
  try {
    if (s.tracked) {
      if (ctx.diskRoom.level() !== 'ok') return; // computeSegment's wait: /health says why
      await computeSegment(ctx, s.project_id, s.id, COMPUTE_JOB_BUDGET_MS);
    } else {
      const row = await findSegmentRow(ctx.database.db, s.project_id, s.id);
      const now = ctx.clock.now();
      if (row) await storeMemberCount(ctx.database.db, row.id, await withConditionTimeout(ctx.database, (db) => countMembers(db, row, now)), now);
    }
  } catch (err) {
    ctx.log.warn({ error: loggableError(err), projectId: s.project_id, segmentId: s.id }, 'segment recompute failed');
  }
}
