import { inArray } from 'drizzle-orm';
import type { Db } from '../../../db/client.ts';
import { type WorkflowBranch, type WorkflowStepType, workflowSteps, workflowTransitions } from '../../../db/schema/workflows.ts';

/** The graphs of the workflows a batch touches, loaded in two statements per batch. */

export type RunStep = { id: string; workflowId: string; type: WorkflowStepType; name: string | null; config: Record<string, unknown> };

export type RunGraph = {
  steps: Map<string, RunStep>;
  /** The step a branch leads to (`null` branch: the single exit), or null when there is none. */
  next: (stepId: string, branch: WorkflowBranch | null) => string | null;
};

export async function loadGraphs(tx: Db, workflowIds: string[]): Promise<Map<string, RunGraph>> {
  const graphs = new Map<string, RunGraph>();
  if (workflowIds.length === 0) return graphs;
  const steps = await tx
    .select({ id: workflowSteps.id, workflowId: workflowSteps.workflowId, type: workflowSteps.type, name: workflowSteps.name, config: workflowSteps.config })
    .from(workflowSteps)
    .where(inArray(workflowSteps.workflowId, workflowIds));
  const transitions = await tx
    .select({ fromStepId: workflowTransitions.fromStepId, toStepId: workflowTransitions.toStepId, branch: workflowTransitions.branch })
    .from(workflowTransitions)
    .where(inArray(workflowTransitions.workflowId, workflowIds));
  const edges = new Map<string, string>();
  for (const t of transitions) edges.set(`${t.fromStepId}|${t.branch ?? ''}`, t.toStepId);
  for (const id of workflowIds) {
    graphs.set(id, { steps: new Map(), next: (stepId, branch) => edges.get(`${stepId}|${branch ?? ''}`) ?? null });
  }
  for (const s of steps) {
    graphs.get(s.workflowId)?.steps.set(s.id, { id: s.id, workflowId: s.workflowId, type: s.type, name: s.name, config: s.config ?? {} });
  }
  return graphs;
}
