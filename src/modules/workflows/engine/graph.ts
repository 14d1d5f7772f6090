import type pg from 'pg';
import type { WorkflowBranch, WorkflowStepType } from '../../../db/schema/workflows.ts';

/** The graphs of the workflows a batch touches, loaded in two statements per batch. */

export type RunStep = { id: string; workflowId: string; type: WorkflowStepType; name: string | null; config: Record<string, unknown> };

export type RunGraph = {
  steps: Map<string, RunStep>;
  /** The step a branch leads to (`null` branch: the single exit), or null when there is none. */
  next: (stepId: string, branch: WorkflowBranch | null) => string | null;
};

export async function loadGraphs(client: pg.PoolClient, workflowIds: string[]): Promise<Map<string, RunGraph>> {
  const graphs = new Map<string, RunGraph>();
  if (workflowIds.length === 0) return graphs;
  const steps = await client.query<{ id: string; workflow_id: string; type: WorkflowStepType; name: string | null; config: Record<string, unknown> }>(
    'SELECT id, workflow_id, type, name, config FROM workflow_steps WHERE workflow_id = ANY($1::uuid[])',
    [workflowIds],
  );
  const transitions = await client.query<{ workflow_id: string; from_step_id: string; to_step_id: string; branch: WorkflowBranch | null }>(
    'SELECT workflow_id, from_step_id, to_step_id, branch FROM workflow_transitions WHERE workflow_id = ANY($1::uuid[])',
    [workflowIds],
  );
  const edges = new Map<string, string>();
  for (const t of transitions.rows) edges.set(`${t.from_step_id}|${t.branch ?? ''}`, t.to_step_id);
  for (const id of workflowIds) {
    graphs.set(id, { steps: new Map(), next: (stepId, branch) => edges.get(`${stepId}|${branch ?? ''}`) ?? null });
  }
  for (const s of steps.rows) {
    graphs.get(s.workflow_id)?.steps.set(s.id, { id: s.id, workflowId: s.workflow_id, type: s.type, name: s.name, config: s.config ?? {} });
  }
  return graphs;
}
