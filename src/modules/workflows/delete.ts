import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type BatchSizes, heldBatchConflict, nextBatchSize, runBatch } from '../../db/batches.ts';
import type { Database, Db } from '../../db/client.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';
import { conflict } from '../../http/errors.ts';
import { findWorkflow } from './store.ts';

/**
 * DELETE /workflows/:id. Its row's foreign-key cascade takes every finished execution and their
 * step executions: a workflow that ran for 300,000 contacts (1,500,000 step executions) was one
 * statement of 4.6 s, holding the workflow row and every execution's row lock throughout (a contact
 * delete waited 3.6 s), and six such deletes at once held six pooled connections 3.4 s each. Now a
 * workflow with more than a batch of executions loses them in short batches first.
 */

/** Deletes of big workflows and segments (DELETE /workflows/:id, DELETE /segments/:id) one project may have under way at once, in a process. */
export const CASCADE_DELETES_PER_PROJECT = 1;
/** Of all projects at once, in a process: each uses one pooled connection while a batch runs. */
export const CASCADE_DELETES_PER_PROCESS = 4;

/** The counters of big workflow and segment deletes under way (ctx.cascadeDeletes); a small one takes none. */
export const cascadeDeleteSlots = (): BusySlots =>
  busySlots({
    perProject: CASCADE_DELETES_PER_PROJECT,
    perProcess: CASCADE_DELETES_PER_PROCESS,
    projectBusy: 'This project already has a delete of a big workflow or segment under way',
    processBusy: 'The server is busy deleting workflows and segments',
  });

/**
 * A batch is the workflow's next finished executions in start order (workflow_executions_workflow_started_idx),
 * deleted with their step executions in one short transaction. Measured at about 15 µs an execution
 * with its five step executions, so the size adapts toward `targetMs` from `first`, at most
 * doubling. A workflow with at most `first` executions is deleted in one transaction, as before,
 * without a slot. Tests lower these.
 */
export const WORKFLOW_DELETE_BATCH: BatchSizes = { first: 1000, min: 100, max: 20_000, targetMs: 200 };

/** Rounds of batches at most: executions added while one ran (the workflow enabled again) are another round. */
const ROUNDS = 3;

type Progress = { deletedExecutions: number };
type Cursor = { startedAt: string; id: string };

/**
 * Deletes the workflow with its graph and finished executions; 409 while executions are RUNNING
 * or WAITING, checked first.
 *
 * A workflow with more than a batch of executions takes a slot of ctx.cascadeDeletes (429 past
 * it, before any change) and is disabled in the transaction that checked it has no active
 * execution, so nothing enrols in it or starts in it meanwhile (the engine checks `enabled` under
 * the workflow's row lock). Its finished executions then go batch by batch, and the workflow row
 * last, checked again. A batch held past BATCH_STATEMENT_MS stops the delete with a 409 counting the
 * executions deleted: the workflow stays, disabled, and asking again finishes it.
 */
export async function deleteWorkflow(ctx: AppContext, projectId: string, id: string): Promise<void> {
  let release: (() => void) | undefined;
  const progress: Progress = { deletedExecutions: 0 };
  try {
    for (let round = 0; ; round++) {
      const workflow = await runBatch(ctx.database, async (db) => {
        const row = await findWorkflow(db, projectId, id, { lock: true });
        await assertNoActiveExecutions(db, row);
        if (!(await hasMoreExecutionsThan(db, row.id, WORKFLOW_DELETE_BATCH.first))) {
          await db.execute(sql`DELETE FROM workflows WHERE id = ${row.id}`);
          return null;
        }
        release ??= ctx.cascadeDeletes.take(projectId);
        if (row.enabled)
          await db.execute(sql`UPDATE workflows SET enabled = false, updated_at = ${ctx.clock.now().toISOString()}::timestamptz WHERE id = ${row.id}`);
        return row;
      }).catch((err: unknown) => {
        throw heldBatchConflict(err, `Deleting workflow ${id} stopped after ${progress.deletedExecutions} executions`, { workflowId: id, ...progress });
      });
      if (workflow === null) return;
      if (round === ROUNDS) {
        throw conflict(`Workflow "${workflow.name}" keeps getting new executions while it is deleted; ask again once it has none`, {
          workflowId: workflow.id,
          ...progress,
        });
      }
      await deleteFinishedExecutions(ctx.database, workflow.id, progress).catch((err: unknown) => {
        throw heldBatchConflict(err, `Deleting workflow "${workflow.name}" stopped after ${progress.deletedExecutions} executions`, {
          workflowId: workflow.id,
          ...progress,
        });
      });
    }
  } finally {
    release?.();
  }
}

async function assertNoActiveExecutions(db: Db, workflow: { id: string; name: string }): Promise<void> {
  const { rows } = await db.execute<{ n: number }>(
    sql`SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = ${workflow.id} AND status IN ('RUNNING', 'WAITING')`,
  );
  if (rows[0].n > 0) {
    throw conflict(
      `Workflow "${workflow.name}" has ${rows[0].n} active execution(s); cancel them (POST /workflows/${workflow.id}/executions/cancel-all) or wait until they finish`,
      { activeExecutions: rows[0].n },
    );
  }
}

async function hasMoreExecutionsThan(db: Db, workflowId: string, n: number): Promise<boolean> {
  const { rows } = await db.execute<{ n: number }>(
    sql`SELECT count(*)::int AS n FROM (SELECT 1 FROM workflow_executions WHERE workflow_id = ${workflowId} LIMIT ${n + 1}) AS x`,
  );
  return rows[0].n > n;
}

/** The workflow's finished executions, batch by batch in start order, counted in `progress`. */
async function deleteFinishedExecutions(database: Database, workflowId: string, progress: Progress): Promise<void> {
  let after: Cursor | null = null;
  let size = WORKFLOW_DELETE_BATCH.first;
  for (;;) {
    const started = performance.now();
    const batch: { picked: number; deleted: number; last: Cursor | null } = await runBatch(database, (db) => deleteExecutionBatch(db, workflowId, after, size));
    progress.deletedExecutions += batch.deleted;
    if (batch.last === null || batch.picked < size) return;
    after = batch.last;
    size = nextBatchSize(WORKFLOW_DELETE_BATCH, size, performance.now() - started);
  }
}

/**
 * One batch: the next `size` finished executions after the cursor. Their step executions go by
 * the foreign key's cascade in the same statement, so a batch locks an execution before its steps,
 * in the order a contact delete's cascade does: the two never deadlock. The cursor is PostgreSQL's
 * own text of the timestamp, exact to the microsecond.
 */
async function deleteExecutionBatch(
  db: Db,
  workflowId: string,
  after: Cursor | null,
  size: number,
): Promise<{ picked: number; deleted: number; last: Cursor | null }> {
  const pastCursor = after === null ? sql`true` : sql`(x.started_at, x.id) > (${after.startedAt}::timestamptz, ${after.id}::uuid)`;
  const { rows } = await db.execute<{ picked: number; deleted: number; last_started_at: string | null; last_id: string | null }>(sql`
    WITH picked AS MATERIALIZED (
      SELECT x.id, x.started_at FROM workflow_executions AS x
       WHERE x.workflow_id = ${workflowId} AND ${pastCursor} AND x.status NOT IN ('RUNNING', 'WAITING')
       ORDER BY x.started_at, x.id
       LIMIT ${size}
    ), deleted AS (
      DELETE FROM workflow_executions AS x USING picked AS p
       WHERE x.id = p.id AND x.status NOT IN ('RUNNING', 'WAITING')
      RETURNING 1
    ), last AS (SELECT p.id, p.started_at FROM picked AS p ORDER BY p.started_at DESC, p.id DESC LIMIT 1)
    SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM deleted)::int AS deleted,
           (SELECT l.started_at::text FROM last AS l) AS last_started_at, (SELECT l.id::text FROM last AS l) AS last_id`);
  const row = rows[0];
  const last = row.last_started_at !== null && row.last_id !== null ? { startedAt: row.last_started_at, id: row.last_id } : null;
  return { picked: row.picked, deleted: row.deleted, last };
}
