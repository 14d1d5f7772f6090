import { type SQL, and, count, desc, eq, ilike, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { workflowSteps, workflows } from '../../db/schema/workflows.ts';
import { type PageList, pageList } from '../../http/pagination.ts';
import { assertRunnable } from './graph.ts';
import type { CreateWorkflowInput, ListWorkflowsQuery, StepCounts, UpdateWorkflowInput, WorkflowDetail, WorkflowRecord } from './schemas.ts';
import { findWorkflow, loadGraph, toStepRecord, toTransitionRecord, toWorkflowRecord } from './store.ts';
import { assertRoomForWorkflow, assertRoomOnTrigger, lockProjectWorkflows } from './caps.ts';
import { containsPattern } from '../../db/like.ts';
import { countExecutions, stepCounts } from './counts.ts';

/** Workflows themselves: list, create (with its TRIGGER step), get with the graph and counts, update, delete. */

export async function listWorkflows(ctx: AppContext, projectId: string, q: ListWorkflowsQuery): Promise<PageList<WorkflowRecord>> {
  const where: SQL[] = [eq(workflows.projectId, projectId)];
  if (q.enabled !== undefined) where.push(eq(workflows.enabled, q.enabled));
  if (q.search) {
    const like = containsPattern(q.search);
    where.push(or(ilike(workflows.name, like), ilike(workflows.description, like), ilike(workflows.eventName, like))!);
  }
  const db = ctx.database.db;
  const [rows, [{ total }]] = await Promise.all([
    db
      .select()
      .from(workflows)
      .where(and(...where))
      .orderBy(desc(workflows.createdAt), desc(workflows.id))
      .limit(q.pageSize)
      .offset((q.page - 1) * q.pageSize),
    db
      .select({ total: count() })
      .from(workflows)
      .where(and(...where)),
  ]);
  return pageList(rows.map(toWorkflowRecord), total, q.page, q.pageSize);
}

/**
 * Creates the workflow (disabled, EVENT trigger) and its TRIGGER step, where every execution starts;
 * 403 with `details.limit` past MAX_WORKFLOWS_PER_PROJECT.
 */
export async function createWorkflow(ctx: AppContext, projectId: string, input: CreateWorkflowInput): Promise<WorkflowDetail> {
  const now = ctx.clock.now();
  const id = uuidv7(now.getTime());
  await withTransaction(ctx.database, async ({ tx }) => {
    await lockProjectWorkflows(tx, projectId);
    await assertRoomForWorkflow(tx, projectId);
    await tx.insert(workflows).values({
      id,
      projectId,
      name: input.name,
      description: input.description ?? null,
      triggerType: 'EVENT',
      eventName: input.eventName,
      enabled: false,
      allowReentry: input.allowReentry,
      createdAt: now,
      updatedAt: now,
    });
    await tx.insert(workflowSteps).values({
      id: uuidv7(now.getTime()),
      workflowId: id,
      projectId,
      type: 'TRIGGER',
      name: 'Trigger',
      config: {},
      createdAt: now,
      updatedAt: now,
    });
  });
  return getWorkflow(ctx, projectId, id);
}

export async function getWorkflow(ctx: AppContext, projectId: string, id: string): Promise<WorkflowDetail> {
  const workflow = await findWorkflow(ctx.database.db, projectId, id);
  const [graph, counts, active] = await Promise.all([
    loadGraph(ctx.database.db, workflow.id),
    stepCounts(ctx.database.db, workflow.id),
    countExecutions(ctx.database.db, workflow.id, ['RUNNING', 'WAITING']),
  ]);
  const zero: StepCounts = { entered: 0, completed: 0, waiting: 0, failed: 0, skipped: 0 };
  return {
    ...toWorkflowRecord(workflow),
    steps: graph.steps.map((s) => ({ ...toStepRecord(s), counts: counts.get(s.id) ?? zero })),
    transitions: graph.transitions.map(toTransitionRecord),
    activeExecutions: active,
  };
}

/**
 * Changes name, description, trigger event, `allowReentry` and `enabled`. Enabling checks the
 * whole graph first (400 naming the bad step). Disabling stops new entries; running executions
 * finish. A workflow that ends up enabled on a trigger (newly, or moved to another event name)
 * must find room there: 403 with `details.limit` past MAX_ENABLED_WORKFLOWS_PER_TRIGGER.
 */
export async function updateWorkflow(ctx: AppContext, projectId: string, id: string, input: UpdateWorkflowInput): Promise<WorkflowDetail> {
  const workflowId = await withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, id, { lock: true });
    const set: Partial<typeof workflows.$inferInsert> = { updatedAt: ctx.clock.now() };
    if (input.name !== undefined) set.name = input.name;
    if (input.description !== undefined) set.description = input.description;
    const eventName = input.triggerConfig?.eventName ?? input.eventName;
    if (eventName !== undefined) set.eventName = eventName;
    if (input.allowReentry !== undefined) set.allowReentry = input.allowReentry;
    if (input.enabled !== undefined) set.enabled = input.enabled;
    if (input.enabled === true && !workflow.enabled) {
      await assertRunnable(ctx, tx, projectId, await loadGraph(tx, workflow.id));
    }
    const enabledAfter = input.enabled ?? workflow.enabled;
    const triggerAfter = eventName ?? workflow.eventName;
    if (enabledAfter && (!workflow.enabled || triggerAfter !== workflow.eventName)) {
      await lockProjectWorkflows(tx, projectId);
      await assertRoomOnTrigger(tx, projectId, triggerAfter, workflow.id);
    }
    await tx.update(workflows).set(set).where(eq(workflows.id, workflow.id));
    return workflow.id;
  });
  return getWorkflow(ctx, projectId, workflowId);
}

/** Delete: a workflow with many executions loses them in short batches first (delete.ts). */
export { deleteWorkflow } from './delete.ts';
