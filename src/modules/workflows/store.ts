import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { UUID } from '../../db/ids.ts';
import { workflowSteps, workflowTransitions, workflows } from '../../db/schema/workflows.ts';
import { notFound } from '../../http/errors.ts';
import type { StepRecord, TransitionRecord, WorkflowRecord } from './schemas.ts';

/** Rows of the workflow tables as API records, and the reads every workflow write starts with. */

export type WorkflowRow = typeof workflows.$inferSelect;
export type StepRow = typeof workflowSteps.$inferSelect;
export type TransitionRow = typeof workflowTransitions.$inferSelect;

export function toWorkflowRecord(w: WorkflowRow): WorkflowRecord {
  return {
    id: w.id,
    projectId: w.projectId,
    name: w.name,
    description: w.description,
    triggerType: w.triggerType,
    triggerConfig: { eventName: w.eventName },
    eventName: w.eventName,
    enabled: w.enabled,
    allowReentry: w.allowReentry,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  };
}

export function toStepRecord(s: StepRow): StepRecord {
  return {
    id: s.id,
    workflowId: s.workflowId,
    type: s.type,
    name: s.name,
    config: s.config,
    position: s.position ?? null,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

export function toTransitionRecord(t: TransitionRow): TransitionRecord {
  return {
    id: t.id,
    workflowId: t.workflowId,
    fromStepId: t.fromStepId,
    toStepId: t.toStepId,
    branch: t.branch,
    createdAt: t.createdAt.toISOString(),
  };
}

/**
 * The workflow of the project; 404 WORKFLOW_NOT_FOUND when the id is malformed, unknown or of
 * another project. `lock` takes the row FOR UPDATE: every graph write does, so two concurrent
 * edits cannot together build a cycle or a second branch.
 */
export async function findWorkflow(db: Db, projectId: string, id: string, opts: { lock?: boolean } = {}): Promise<WorkflowRow> {
  if (!UUID.test(id)) throw notFound('workflow', id);
  const query = db
    .select()
    .from(workflows)
    .where(and(eq(workflows.projectId, projectId), eq(workflows.id, id.toLowerCase())));
  const [row] = opts.lock ? await query.for('update') : await query;
  if (!row) throw notFound('workflow', id);
  return row;
}

export type Graph = { steps: StepRow[]; transitions: TransitionRow[] };

/** Every step (creation order) and transition of a workflow. */
export async function loadGraph(db: Db, workflowId: string): Promise<Graph> {
  const [steps, transitions] = await Promise.all([
    db.select().from(workflowSteps).where(eq(workflowSteps.workflowId, workflowId)).orderBy(asc(workflowSteps.createdAt), asc(workflowSteps.id)),
    db
      .select()
      .from(workflowTransitions)
      .where(eq(workflowTransitions.workflowId, workflowId))
      .orderBy(asc(workflowTransitions.createdAt), asc(workflowTransitions.id)),
  ]);
  return { steps, transitions };
}

/** A step's label in messages: `"Welcome email" (SEND_EMAIL, <id>)`. */
export function describeStep(s: Pick<StepRow, 'id' | 'name' | 'type'>): string {
  return s.name ? `"${s.name}" (${s.type}, ${s.id})` : `${s.type} step ${s.id}`;
}
