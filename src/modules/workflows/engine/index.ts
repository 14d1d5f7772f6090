import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { type Db, withTransaction } from '../../../db/client.ts';
import { UUID, uuidv7 } from '../../../db/ids.ts';
import { contacts } from '../../../db/schema/contacts.ts';
import { workflowExecutions, workflows } from '../../../db/schema/workflows.ts';
import { conflict, notFound } from '../../../http/errors.ts';

/**
 * The workflow engine: enrol → advance → wait → resume → finish.
 * A facade over enrol.ts (entries and resumptions from the event path), advance.ts (the batch
 * worker), steps.ts (one executor per step type), webhook.ts / webhook-step.ts (the signed,
 * SSRF-guarded sender and its durable retries). The runner loop is in ../jobs.ts.
 */

export type ExecutionStatus = 'RUNNING' | 'WAITING' | 'COMPLETED' | 'EXITED' | 'FAILED' | 'CANCELLED';

/** The execution row as the engine returns it (the API side shapes responses from its own reads). */
export type ExecutionRow = {
  id: string;
  projectId: string;
  workflowId: string;
  contactId: string;
  status: ExecutionStatus;
  currentStepId: string | null;
  context: Record<string, unknown>;
  dueAt: Date | null;
  waitingEvent: string | null;
  exitReason: string | null;
  error: string | null;
  startedAt: Date;
  completedAt: Date | null;
  updatedAt: Date;
};

/** The columns of an ExecutionRow (all but `depth` and `lease_until`). */
const executionColumns = {
  id: workflowExecutions.id,
  projectId: workflowExecutions.projectId,
  workflowId: workflowExecutions.workflowId,
  contactId: workflowExecutions.contactId,
  status: workflowExecutions.status,
  currentStepId: workflowExecutions.currentStepId,
  context: workflowExecutions.context,
  dueAt: workflowExecutions.dueAt,
  waitingEvent: workflowExecutions.waitingEvent,
  exitReason: workflowExecutions.exitReason,
  error: workflowExecutions.error,
  startedAt: workflowExecutions.startedAt,
  completedAt: workflowExecutions.completedAt,
  updatedAt: workflowExecutions.updatedAt,
};

/**
 * Starts an execution of `workflowId` for `contactId` (POST /workflows/:id/executions) at its
 * TRIGGER step, with `context` as its execution context; the runner picks it up within a poll.
 * 404 when the workflow or contact is not in the project; 409 CONFLICT when the workflow is
 * disabled, the contact has an active execution of it, or entered it before and it does not
 * allow re-entry.
 */
export async function startExecution(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  contactId: string,
  context: Record<string, unknown>,
): Promise<ExecutionRow> {
  if (!UUID.test(workflowId)) throw notFound('workflow', workflowId);
  const id = workflowId.toLowerCase();
  const now = ctx.clock.now();
  return withTransaction(ctx.database, async ({ tx }) => {
    const {
      rows: [workflow],
    } = await tx.execute<{ enabled: boolean; allow_reentry: boolean; trigger_id: string | null }>(sql`
      SELECT w.enabled, w.allow_reentry, (SELECT s.id FROM workflow_steps s WHERE s.workflow_id = w.id AND s.type = 'TRIGGER' LIMIT 1) AS trigger_id
        FROM workflows w WHERE w.id = ${id} AND w.project_id = ${projectId} FOR SHARE`);
    if (!workflow) throw notFound('workflow', workflowId);
    const contact = await tx
      .select({ id: contacts.id })
      .from(contacts)
      .where(and(eq(contacts.id, contactId), eq(contacts.projectId, projectId)));
    if (contact.length === 0) throw notFound('contact', contactId);
    if (!workflow.enabled) throw conflict('Workflow is disabled: enable it before starting executions', { workflowId });
    const {
      rows: [prior],
    } = await tx.execute<{ active: boolean | null }>(sql`
      SELECT bool_or(status IN ('RUNNING', 'WAITING')) AS active FROM workflow_executions WHERE workflow_id = ${id} AND contact_id = ${contactId}`);
    if (prior?.active) throw conflict('The contact already has an active execution of this workflow', { workflowId, contactId });
    if (prior?.active === false && !workflow.allow_reentry) {
      throw conflict('The contact already went through this workflow and it does not allow re-entry', { workflowId, contactId });
    }
    const [started] = await tx
      .insert(workflowExecutions)
      .values({
        id: uuidv7(now.getTime()),
        projectId,
        workflowId: id,
        contactId,
        status: 'RUNNING',
        currentStepId: workflow.trigger_id,
        context: context ?? {},
        depth: 0,
        dueAt: now,
        startedAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing()
      .returning(executionColumns);
    if (!started) throw conflict('The contact already has an active execution of this workflow', { workflowId, contactId });
    return started;
  });
}

/** Steps left waiting by cancelled executions are closed as SKIPPED. */
async function closeWaitingSteps(tx: Db, executionIds: string[], now: Date): Promise<void> {
  await tx.execute(sql`
    UPDATE workflow_step_executions SET status = 'SKIPPED', error = 'execution cancelled', completed_at = ${now.toISOString()}::timestamptz
     WHERE execution_id = ANY(${sql.param(executionIds)}::uuid[]) AND status = 'WAITING'`);
}

/** An active execution, written as a literal list: the predicate of the partial indexes (due_at, active key). */
export const isActiveExecution = sql`${workflowExecutions.status} IN ('RUNNING', 'WAITING')`;

/** The update that cancels executions; the caller adds which. */
const setCancelled = (tx: Db, now: Date) =>
  tx.update(workflowExecutions).set({ status: 'CANCELLED', dueAt: null, waitingEvent: null, leaseUntil: null, completedAt: now, updatedAt: now });

/** Cancels one active execution and returns it (404 when not in the project); a finished one is returned unchanged. */
export async function cancelExecution(ctx: AppContext, projectId: string, executionId: string): Promise<ExecutionRow> {
  if (!UUID.test(executionId)) throw notFound('workflow_execution', executionId);
  const id = executionId.toLowerCase();
  const now = ctx.clock.now();
  return withTransaction(ctx.database, async ({ tx }) => {
    const inProject = and(eq(workflowExecutions.id, id), eq(workflowExecutions.projectId, projectId));
    const [stopped] = await setCancelled(tx, now).where(and(inProject, isActiveExecution)).returning(executionColumns);
    if (stopped) {
      await closeWaitingSteps(tx, [stopped.id], now);
      return stopped;
    }
    const [existing] = await tx.select(executionColumns).from(workflowExecutions).where(inProject);
    if (!existing) throw notFound('workflow_execution', executionId);
    return existing;
  });
}

/** Cancels every active execution of a workflow (404 when not in the project); returns how many. */
export async function cancelAllExecutions(ctx: AppContext, projectId: string, workflowId: string): Promise<{ cancelled: number }> {
  if (!UUID.test(workflowId)) throw notFound('workflow', workflowId);
  const id = workflowId.toLowerCase();
  const now = ctx.clock.now();
  return withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await tx
      .select({ id: workflows.id })
      .from(workflows)
      .where(and(eq(workflows.id, id), eq(workflows.projectId, projectId)));
    if (workflow.length === 0) throw notFound('workflow', workflowId);
    const stopped = await setCancelled(tx, now)
      .where(and(eq(workflowExecutions.workflowId, id), isActiveExecution))
      .returning({ id: workflowExecutions.id });
    const stoppedIds = stopped.map((r) => r.id);
    if (stoppedIds.length > 0) await closeWaitingSteps(tx, stoppedIds, now);
    return { cancelled: stopped.length };
  });
}
