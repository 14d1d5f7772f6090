import { type SQL, and, asc, desc, eq, getTableColumns, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { PREFIXED_ID, UUID } from '../../db/ids.ts';
import { budgetExpressions, budgetedPage } from '../../db/page-budget.ts';
import { contacts } from '../../db/schema/contacts.ts';
import { workflowExecutions, workflowStepExecutions, workflowSteps } from '../../db/schema/workflows.ts';
import { conflict, notFound } from '../../http/errors.ts';
import { encodeCursor } from '../../http/cursor.ts';
import { afterCursor } from '../../http/keyset.ts';
import { cancelAllExecutions, cancelExecution, startExecution } from './engine/index.ts';
import type { ExecutionRecord, StepExecutionRecord } from './schemas.ts';
import { findWorkflow } from './store.ts';
import { countExecutions } from './counts.ts';

/** GET/POST /workflows/:id/executions…: reads here; starting and cancelling are the engine's. */

type ExecutionRow = typeof workflowExecutions.$inferSelect;

function toExecutionRecord(e: ExecutionRow, email: string | null): ExecutionRecord {
  return {
    id: e.id,
    workflowId: e.workflowId,
    contactId: e.contactId,
    contact: email === null ? null : { id: e.contactId, email },
    status: e.status,
    currentStepId: e.currentStepId,
    context: e.context,
    waitingFor: e.status === 'WAITING' ? e.waitingEvent : null,
    dueAt: e.dueAt && (e.status === 'WAITING' || e.status === 'RUNNING') ? e.dueAt.toISOString() : null,
    exitReason: e.exitReason,
    error: e.error,
    startedAt: e.startedAt.toISOString(),
    completedAt: e.completedAt?.toISOString() ?? null,
    updatedAt: e.updatedAt.toISOString(),
  };
}

export type ListExecutionsInput = { status?: ExecutionRow['status']; limit: number; cursor?: string };

/**
 * The statement behind a page of the list, newest first. A page of one ending reads that status's
 * entries in `workflow_executions_workflow_ended_idx`; an active status's, the runner's partial
 * indexes (test/list-plans.test.ts checks both).
 */
export function executionsPageQuery(db: Db, workflowId: string, q: ListExecutionsInput) {
  const where: SQL[] = [eq(workflowExecutions.workflowId, workflowId)];
  if (q.status) where.push(eq(workflowExecutions.status, q.status));
  const after = afterCursor(q.cursor, workflowExecutions.startedAt, workflowExecutions.id, (k) => UUID.test(k));
  // A page ends early once it holds PAGE_DATA_BUDGET of contexts (db/page-budget.ts): each is an
  // event's data (256 KB) with the awaited events' merged in.
  const order = sql`${workflowExecutions.startedAt} DESC, ${workflowExecutions.id} DESC`;
  const { context: _context, ...columns } = getTableColumns(workflowExecutions);
  const budget = budgetExpressions(sql`${workflowExecutions.context}`, sql`octet_length(${workflowExecutions.context}::text)`, order);
  return db
    .select({ ...columns, context: sql<Record<string, unknown> | null>`${budget.kept}`, in_page: sql<boolean>`${budget.inPage}`, email: contacts.email })
    .from(workflowExecutions)
    .leftJoin(contacts, eq(contacts.id, workflowExecutions.contactId))
    .where(and(...where, after))
    .orderBy(desc(workflowExecutions.startedAt), desc(workflowExecutions.id))
    .limit(q.limit + 1);
}

export async function listExecutions(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  q: ListExecutionsInput,
): Promise<{ data: ExecutionRecord[]; cursor?: string; hasMore: boolean; total: number }> {
  const db = ctx.database.db;
  const workflow = await findWorkflow(db, projectId, workflowId);
  const rows = await executionsPageQuery(db, workflow.id, q);
  const { items, hasMore } = budgetedPage(rows, q.limit);
  // `total` on the first page, 0 on later ones (as every cursor list).
  const out: { data: ExecutionRecord[]; cursor?: string; hasMore: boolean; total: number } = {
    data: items.map(({ email, in_page: _inPage, ...e }) => toExecutionRecord({ ...e, context: e.context ?? {} }, email)),
    hasMore,
    total: q.cursor ? 0 : await countExecutions(db, workflow.id, q.status ? [q.status] : undefined),
  };
  const last = items.at(-1);
  if (hasMore && last) out.cursor = encodeCursor(last.startedAt.toISOString(), last.id);
  return out;
}

async function executionOf(ctx: AppContext, projectId: string, workflowId: string, executionId: string) {
  if (!UUID.test(executionId)) throw notFound('workflow_execution', executionId);
  const [row] = await ctx.database.db
    .select({ e: workflowExecutions, email: contacts.email })
    .from(workflowExecutions)
    .leftJoin(contacts, eq(contacts.id, workflowExecutions.contactId))
    .where(
      and(eq(workflowExecutions.projectId, projectId), eq(workflowExecutions.workflowId, workflowId), eq(workflowExecutions.id, executionId.toLowerCase())),
    );
  if (!row) throw notFound('workflow_execution', executionId);
  return row;
}

/** The execution with its step history, oldest step first. */
export async function getExecution(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  executionId: string,
): Promise<ExecutionRecord & { stepExecutions: StepExecutionRecord[] }> {
  const workflow = await findWorkflow(ctx.database.db, projectId, workflowId);
  const { e, email } = await executionOf(ctx, projectId, workflow.id, executionId);
  const steps = await ctx.database.db
    .select({ s: workflowStepExecutions, type: workflowSteps.type })
    .from(workflowStepExecutions)
    .leftJoin(workflowSteps, eq(workflowSteps.id, workflowStepExecutions.stepId))
    .where(eq(workflowStepExecutions.executionId, e.id))
    .orderBy(asc(workflowStepExecutions.startedAt), asc(workflowStepExecutions.id))
    .limit(1000);
  return {
    ...toExecutionRecord(e, email),
    stepExecutions: steps.map(({ s, type }) => ({
      id: s.id,
      stepId: s.stepId,
      stepType: type,
      status: s.status,
      attempt: s.attempt,
      output: s.output,
      error: s.error,
      startedAt: s.startedAt.toISOString(),
      completedAt: s.completedAt?.toISOString() ?? null,
    })),
  };
}

/**
 * Starts an execution for a contact of the project, named by id or email. The workflow must be
 * enabled (a disabled one takes no new entries); the engine applies the enrolment rules.
 */
export async function startWorkflowExecution(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  input: { contactId?: string; email?: string; context?: Record<string, unknown> },
): Promise<ExecutionRecord> {
  const db = ctx.database.db;
  const workflow = await findWorkflow(db, projectId, workflowId);
  const byId = input.contactId !== undefined;
  const key = byId ? input.contactId! : input.email!;
  if (byId && !PREFIXED_ID('cnt').test(key)) throw notFound('contact', key);
  const [contact] = await db
    .select({ id: contacts.id })
    .from(contacts)
    .where(and(eq(contacts.projectId, projectId), byId ? eq(contacts.id, key) : eq(contacts.email, key)));
  if (!contact) throw notFound('contact', key);
  if (!workflow.enabled) {
    throw conflict(`Workflow "${workflow.name}" is disabled and takes no new executions; enable it with PATCH /workflows/${workflow.id} { "enabled": true }`);
  }
  const started = await startExecution(ctx, projectId, workflow.id, contact.id, input.context ?? {});
  const { e, email } = await executionOf(ctx, projectId, workflow.id, started.id);
  return toExecutionRecord(e, email);
}

/** Cancels one RUNNING or WAITING execution; a finished one is returned unchanged. */
export async function cancelWorkflowExecution(ctx: AppContext, projectId: string, workflowId: string, executionId: string): Promise<ExecutionRecord> {
  const workflow = await findWorkflow(ctx.database.db, projectId, workflowId);
  const { e } = await executionOf(ctx, projectId, workflow.id, executionId);
  await cancelExecution(ctx, projectId, e.id);
  const after = await executionOf(ctx, projectId, workflow.id, e.id);
  return toExecutionRecord(after.e, after.email);
}

export async function cancelAllWorkflowExecutions(ctx: AppContext, projectId: string, workflowId: string): Promise<{ cancelled: number }> {
  const workflow = await findWorkflow(ctx.database.db, projectId, workflowId);
  return cancelAllExecutions(ctx, projectId, workflow.id);
}
