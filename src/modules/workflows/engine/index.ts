import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { UUID, uuidv7 } from '../../../db/ids.ts';
import { conflict, notFound } from '../../../http/errors.ts';

/**
 * The workflow engine: enrol → advance → wait → resume → finish.
 * A facade over enrol.ts (entries and resumptions from the event path), advance.ts (the batch
 * worker), steps.ts (one executor per step type), webhook.ts / webhook-step.ts (the signed,
 * SSRF-guarded sender and its durable retries). The runner loop is in ../jobs.ts.
 */

export { workflowsOnEvent } from './enrol.ts';

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

type Raw = {
  id: string;
  project_id: string;
  workflow_id: string;
  contact_id: string;
  status: ExecutionStatus;
  current_step_id: string | null;
  context: Record<string, unknown>;
  due_at: Date | null;
  waiting_event: string | null;
  exit_reason: string | null;
  error: string | null;
  started_at: Date;
  completed_at: Date | null;
  updated_at: Date;
};

const COLUMNS =
  'id, project_id, workflow_id, contact_id, status, current_step_id, context, due_at, waiting_event, exit_reason, error, started_at, completed_at, updated_at';

const toRow = (r: Raw): ExecutionRow => ({
  id: r.id,
  projectId: r.project_id,
  workflowId: r.workflow_id,
  contactId: r.contact_id,
  status: r.status,
  currentStepId: r.current_step_id,
  context: r.context ?? {},
  dueAt: r.due_at,
  waitingEvent: r.waiting_event,
  exitReason: r.exit_reason,
  error: r.error,
  startedAt: r.started_at,
  completedAt: r.completed_at,
  updatedAt: r.updated_at,
});

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
  const now = ctx.clock.now().toISOString();
  return withTransaction(ctx.database, async ({ client }) => {
    const { rows: wf } = await client.query<{ enabled: boolean; allow_reentry: boolean; trigger_id: string | null }>(
      `SELECT w.enabled, w.allow_reentry, (SELECT s.id FROM workflow_steps s WHERE s.workflow_id = w.id AND s.type = 'TRIGGER' LIMIT 1) AS trigger_id
         FROM workflows w WHERE w.id = $1 AND w.project_id = $2 FOR SHARE`,
      [workflowId.toLowerCase(), projectId],
    );
    if (!wf[0]) throw notFound('workflow', workflowId);
    const { rows: contact } = await client.query('SELECT 1 FROM contacts WHERE id = $1 AND project_id = $2', [contactId, projectId]);
    if (contact.length === 0) throw notFound('contact', contactId);
    if (!wf[0].enabled) throw conflict('Workflow is disabled: enable it before starting executions', { workflowId });
    const { rows: prior } = await client.query<{ active: boolean }>(
      "SELECT bool_or(status IN ('RUNNING', 'WAITING')) AS active FROM workflow_executions WHERE workflow_id = $1 AND contact_id = $2",
      [workflowId.toLowerCase(), contactId],
    );
    if (prior[0]?.active) throw conflict('The contact already has an active execution of this workflow', { workflowId, contactId });
    if (prior[0]?.active === false && !wf[0].allow_reentry) {
      throw conflict('The contact already went through this workflow and it does not allow re-entry', { workflowId, contactId });
    }
    const { rows } = await client.query<Raw>(
      `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, context, depth, due_at, started_at, updated_at)
       VALUES ($7, $1, $2, $3, 'RUNNING', $4, $5::jsonb, 0, $6::timestamptz, $6::timestamptz, $6::timestamptz)
       ON CONFLICT DO NOTHING
       RETURNING ${COLUMNS}`,
      [projectId, workflowId.toLowerCase(), contactId, wf[0].trigger_id, JSON.stringify(context ?? {}), now, uuidv7(Date.parse(now))],
    );
    if (!rows[0]) throw conflict('The contact already has an active execution of this workflow', { workflowId, contactId });
    return toRow(rows[0]);
  });
}

/** Steps left waiting by a cancelled execution are closed as SKIPPED. */
const CLOSE_WAITING_STEPS = `
  UPDATE workflow_step_executions SET status = 'SKIPPED', error = 'execution cancelled', completed_at = $2::timestamptz
   WHERE execution_id = ANY($1::uuid[]) AND status = 'WAITING'`;

/** Cancels one active execution and returns it (404 when not in the project); a finished one is returned unchanged. */
export async function cancelExecution(ctx: AppContext, projectId: string, executionId: string): Promise<ExecutionRow> {
  if (!UUID.test(executionId)) throw notFound('workflow_execution', executionId);
  const now = ctx.clock.now().toISOString();
  return withTransaction(ctx.database, async ({ client }) => {
    const { rows } = await client.query<Raw>(
      `UPDATE workflow_executions
          SET status = 'CANCELLED', due_at = NULL, waiting_event = NULL, lease_until = NULL, completed_at = $3::timestamptz, updated_at = $3::timestamptz
        WHERE id = $1 AND project_id = $2 AND status IN ('RUNNING', 'WAITING')
       RETURNING ${COLUMNS}`,
      [executionId.toLowerCase(), projectId, now],
    );
    if (rows[0]) {
      await client.query(CLOSE_WAITING_STEPS, [[rows[0].id], now]);
      return toRow(rows[0]);
    }
    const { rows: existing } = await client.query<Raw>(`SELECT ${COLUMNS} FROM workflow_executions WHERE id = $1 AND project_id = $2`, [
      executionId.toLowerCase(),
      projectId,
    ]);
    if (!existing[0]) throw notFound('workflow_execution', executionId);
    return toRow(existing[0]);
  });
}

/** Cancels every active execution of a workflow (404 when not in the project); returns how many. */
export async function cancelAllExecutions(ctx: AppContext, projectId: string, workflowId: string): Promise<{ cancelled: number }> {
  if (!UUID.test(workflowId)) throw notFound('workflow', workflowId);
  const now = ctx.clock.now().toISOString();
  return withTransaction(ctx.database, async ({ client }) => {
    const { rowCount } = await client.query('SELECT 1 FROM workflows WHERE id = $1 AND project_id = $2', [workflowId.toLowerCase(), projectId]);
    if (!rowCount) throw notFound('workflow', workflowId);
    const { rows } = await client.query<{ id: string }>(
      `UPDATE workflow_executions
          SET status = 'CANCELLED', due_at = NULL, waiting_event = NULL, lease_until = NULL, completed_at = $2::timestamptz, updated_at = $2::timestamptz
        WHERE workflow_id = $1 AND status IN ('RUNNING', 'WAITING')
       RETURNING id`,
      [workflowId.toLowerCase(), now],
    );
    if (rows.length > 0) await client.query(CLOSE_WAITING_STEPS, [rows.map((r) => r.id), now]);
    return { cancelled: rows.length };
  });
}
