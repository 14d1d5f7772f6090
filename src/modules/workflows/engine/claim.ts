import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Db } from '../../../db/client.ts';
import type { ClaimedExecution } from './advance.ts';

/**
 * The claim of the advance part: which due executions a batch takes (`FOR UPDATE SKIP LOCKED`, so
 * concurrent batches take different ones and a crashed worker's rows are free at once).
 *
 * Oldest first over the `due_at` index is cheapest, but it serves projects in the order their work
 * fell due: one project with a backlog of 100k due executions (one track fanned out to its
 * workflows, a DELAY ending for a whole audience) held every other project's executions back until
 * it was through. So after a full batch (more is due than one batch takes) the runner claims fairly
 * until a batch comes back short (workflows/jobs.ts): every project with due executions gets an equal share of the
 * batch, its oldest first (the per-project `(project_id, due_at)` index: one probe per project with
 * active executions, then its share), and the room the shares leave goes oldest first as before,
 * so a project alone still gets whole batches. Another project's execution then waits a batch or
 * so, not the whole backlog.
 */

export type ClaimOptions = {
  now: Date;
  /** Wall-clock time for leases (the engine clock may be a test's). */
  realNow: Date;
  batchSize: number;
  /** Shares per project (the runner's last batch was full); otherwise oldest first. */
  fair?: boolean;
  /** Only these executions (the one-by-one retry of a failed batch): oldest first. */
  ids?: string[];
  /** Only these projects' executions (the runner's slow lane), or all but these (its other loops). */
  projects?: ProjectFilter;
};

export type ProjectFilter = { only: string[] } | { except: string[] };

/** Which projects a claim takes, by the column that holds the project. */
const ofProjects = (f: ProjectFilter | undefined, column: SQL): SQL =>
  f === undefined ? sql`true` : 'only' in f ? sql`${column} = ANY(${sql.param(f.only)}::text[])` : sql`${column} <> ALL(${sql.param(f.except)}::text[])`;

const ACTIVE = sql.raw(`x.status IN ('RUNNING', 'WAITING')`);
const COLUMNS = sql.raw('x.id, x.project_id, x.workflow_id, x.contact_id, x.status, x.current_step_id, x.context, x.depth, x.waiting_event');

/** Due now and not leased to a webhook attempt in flight. */
const claimable = (o: Pick<ClaimOptions, 'now' | 'realNow'>): SQL => sql`${ACTIVE} AND x.due_at <= ${o.now.toISOString()}::timestamptz
       AND (x.lease_until IS NULL OR x.lease_until < ${o.realNow.toISOString()}::timestamptz)`;

/**
 * When the soonest execution falls due (claimable's conditions but the due time), as one named
 * statement outside a transaction: an idle runner asks this instead of opening a transaction to
 * claim nothing (three statements), and builds no SQL to ask it. Only executions due by
 * `horizon` are looked at, so that the statement reads as few rows as a question about now would:
 * the index is on due_at alone, and the executions of projects left out are read and passed over.
 */
const NEXT_DUE_SQL = {
  name: 'herald_workflows_next_due_v1',
  text: `SELECT x.due_at FROM workflow_executions x
          WHERE x.status IN ('RUNNING', 'WAITING') AND x.due_at <= $1::timestamptz
            AND (x.lease_until IS NULL OR x.lease_until < $2::timestamptz)
            AND ($3::text[] IS NULL OR x.project_id = ANY($3::text[])) AND x.project_id <> ALL($4::text[])
          ORDER BY x.due_at LIMIT 1`,
} as const;

/**
 * The due time of the soonest execution due by `horizon` (null when none is), of the `projects` the
 * claim takes: a loop that leaves the slow lane's projects out is not told of their executions.
 */
export async function nextDue(pool: pg.Pool, o: Pick<ClaimOptions, 'realNow' | 'projects'> & { horizon: Date }): Promise<Date | null> {
  const only = o.projects && 'only' in o.projects ? o.projects.only : null;
  const except = o.projects && 'except' in o.projects ? o.projects.except : [];
  const { rows } = await pool.query<{ due_at: Date }>({ ...NEXT_DUE_SQL, values: [o.horizon, o.realNow, only, except] });
  return rows[0]?.due_at ?? null;
}

export async function claimDue(tx: Db, o: ClaimOptions): Promise<ClaimedExecution[]> {
  if (o.ids || !o.fair) return claimOldest(tx, o, o.batchSize, [], o.ids ?? null);
  const shares = await claimFairShares(tx, o);
  const room = o.batchSize - shares.length;
  const rest =
    room > 0
      ? await claimOldest(
          tx,
          o,
          room,
          shares.map((e) => e.id),
          null,
        )
      : [];
  return [...shares, ...rest];
}

/** The oldest due executions (the `due_at` index), leaving out `except` (rows this transaction holds already). */
async function claimOldest(tx: Db, o: ClaimOptions, limit: number, except: string[], only: string[] | null): Promise<ClaimedExecution[]> {
  const { rows } = await tx.execute<ClaimedExecution>(sql`
    SELECT ${COLUMNS}
      FROM workflow_executions x
     WHERE ${claimable(o)}
       AND (${sql.param(only)}::uuid[] IS NULL OR x.id = ANY(${sql.param(only)}::uuid[]))
       AND x.id <> ALL(${sql.param(except)}::uuid[])
       AND ${ofProjects(o.projects, sql.raw('x.project_id'))}
     ORDER BY x.due_at
     LIMIT ${limit}
       FOR UPDATE SKIP LOCKED`);
  return rows;
}

/**
 * Up to `batchSize` due executions shared out between the projects that have any: every project's
 * oldest first, then every one's second, … up to its share (the batch over the number of projects
 * with due executions, at least 1). The projects come from a skip scan of the per-project index
 * (a probe or two per project with active executions, however many executions each has) and a
 * share from one range of it, so the cost grows with the projects and the batch, not with a backlog.
 */
async function claimFairShares(tx: Db, o: ClaimOptions): Promise<ClaimedExecution[]> {
  return (await tx.execute<ClaimedExecution>(fairSharesQuery(o))).rows;
}

const fairSharesQuery = (o: ClaimOptions): SQL => sql`
    WITH RECURSIVE active_projects(project_id) AS (
      (SELECT x.project_id FROM workflow_executions x WHERE ${ACTIVE} ORDER BY x.project_id LIMIT 1)
      UNION ALL
      SELECT (SELECT x.project_id FROM workflow_executions x WHERE ${ACTIVE} AND x.project_id > a.project_id ORDER BY x.project_id LIMIT 1)
        FROM active_projects a
       WHERE a.project_id IS NOT NULL
    ), due_projects AS MATERIALIZED (
      SELECT a.project_id FROM active_projects a
       WHERE a.project_id IS NOT NULL
         AND ${ofProjects(o.projects, sql.raw('a.project_id'))}
         AND EXISTS (SELECT 1 FROM workflow_executions x WHERE x.project_id = a.project_id AND ${claimable(o)})
    ), share AS (
      SELECT GREATEST(1, ceil(${o.batchSize}::numeric / GREATEST(count(*), 1)))::int AS k FROM due_projects
    ), candidates AS (
      SELECT d.id FROM due_projects p
       CROSS JOIN LATERAL (
         SELECT x.id, x.due_at, row_number() OVER (ORDER BY x.due_at) AS turn
           FROM workflow_executions x
          WHERE x.project_id = p.project_id AND ${claimable(o)}
          ORDER BY x.due_at
          LIMIT (SELECT k FROM share)
       ) d
       ORDER BY d.turn, d.due_at
       LIMIT ${o.batchSize}
    )
    SELECT ${COLUMNS}
      FROM workflow_executions x
     WHERE x.id IN (SELECT id FROM candidates) AND ${claimable(o)}
       FOR UPDATE SKIP LOCKED`;
