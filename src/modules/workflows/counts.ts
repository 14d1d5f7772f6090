import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { equalsAny } from '../../db/any.ts';
import { sumCounter } from '../../db/counter-rows.ts';
import { NO_STEP, type WorkflowExecutionStatus, workflowExecutionCounts } from '../../db/schema/workflows.ts';
import type { StepCounts } from './schemas.ts';

/**
 * A workflow's counts, from the counters in workflow_execution_counts and workflow_step_counts
 * (db/schema/workflows.ts), which triggers on the executions' tables keep in the statements that
 * write them (migration 0019): a few rows per step and status however many executions ran.
 */

/**
 * Per step: executions that entered it, completed it, wait at it now, failed at it, and skipped it
 * (an email not sent: unsubscribed or suppressed contact; a wait ended by a cancel).
 */
export async function stepCounts(db: Db, workflowId: string): Promise<Map<string, StepCounts>> {
  const [runs, waiting] = await Promise.all([
    // One step-execution row per step an execution runs (graphs have no cycles; retries update the
    // row), so counts of those rows are per-execution counts.
    db.execute<{ step_id: string; entered: string; completed: string; failed: string; skipped: string }>(sql`
      SELECT step_id, sum(count) AS entered,
             coalesce(sum(count) FILTER (WHERE status = 'COMPLETED'), 0) AS completed,
             coalesce(sum(count) FILTER (WHERE status = 'FAILED'), 0) AS failed,
             coalesce(sum(count) FILTER (WHERE status = 'SKIPPED'), 0) AS skipped
        FROM workflow_step_counts
       WHERE workflow_id = ${workflowId}
       GROUP BY step_id`),
    db.execute<{ step_id: string; waiting: string }>(sql`
      SELECT step_id, sum(count) AS waiting
        FROM workflow_execution_counts
       WHERE workflow_id = ${workflowId} AND status = 'WAITING' AND step_id <> ${NO_STEP}::uuid
       GROUP BY step_id`),
  ]);
  const counts = new Map<string, StepCounts>();
  const of = (id: string) => counts.get(id) ?? counts.set(id, { entered: 0, completed: 0, waiting: 0, failed: 0, skipped: 0 }).get(id)!;
  for (const r of runs.rows)
    Object.assign(of(r.step_id), { entered: Number(r.entered), completed: Number(r.completed), failed: Number(r.failed), skipped: Number(r.skipped) });
  for (const r of waiting.rows) of(r.step_id).waiting = Number(r.waiting);
  return counts;
}

/** The workflow's executions, or those of the given statuses. */
export const countExecutions = (db: Db, workflowId: string, statuses?: WorkflowExecutionStatus[]): Promise<number> =>
  sumCounter(
    db,
    'workflow_execution_counts',
    sql`workflow_id = ${workflowId}${statuses ? sql` AND ${equalsAny(workflowExecutionCounts.status, statuses, 'text')}` : sql``}`,
  );
