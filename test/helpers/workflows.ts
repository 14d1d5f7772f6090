import assert from 'node:assert/strict';
import type { Api } from './http.ts';

/** Building workflows through the API, for the workflow engine tests. */

export type StepSpec = { key: string; type: string; config?: Record<string, unknown> };
export type EdgeSpec = [from: string, to: string, branch?: 'yes' | 'no' | 'event' | 'timeout'];

/** A moving clock for startTestServer: `advance(ms)` jumps it forward. */
export function testClock() {
  let offset = 0;
  return {
    now: () => new Date(Date.now() + offset),
    advance: (ms: number) => {
      offset += ms;
    },
  };
}

/**
 * Creates a workflow triggered by `eventName`, adds `steps`, links them (`trigger` names the TRIGGER
 * step), and enables it unless `enabled: false`. Returns the workflow id and the step ids by key.
 */
export async function buildWorkflow(
  sk: Api,
  opts: { name?: string; eventName: string; allowReentry?: boolean; steps: StepSpec[]; edges: EdgeSpec[]; enabled?: boolean },
): Promise<{ id: string; steps: Record<string, string> }> {
  const created = await sk.post('/workflows', {
    name: opts.name ?? `wf ${opts.eventName}`,
    eventName: opts.eventName,
    allowReentry: opts.allowReentry ?? false,
  });
  assert.equal(created.status, 201, created.text);
  const id: string = created.body.id;
  const trigger = created.body.steps.find((s: { type: string }) => s.type === 'TRIGGER');
  const steps: Record<string, string> = { trigger: trigger.id };
  for (const s of opts.steps) {
    const res = await sk.post(`/workflows/${id}/steps`, { type: s.type, config: s.config ?? {} });
    assert.equal(res.status, 201, res.text);
    steps[s.key] = res.body.id;
  }
  for (const [from, to, branch] of opts.edges) {
    const res = await sk.post(`/workflows/${id}/transitions`, { fromStepId: steps[from], toStepId: steps[to], ...(branch ? { branch } : {}) });
    assert.equal(res.status, 201, res.text);
  }
  if (opts.enabled !== false) {
    const res = await sk.patch(`/workflows/${id}`, { enabled: true });
    assert.equal(res.status, 200, res.text);
  }
  return { id, steps };
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 60_000, stepMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export type DueGroup = { projectId: string; workflowId: string; stepId: string; count: number; tag: string; dueAfterMs?: number };

/**
 * Per group, `count` new contacts and an execution of its workflow for each, RUNNING at `stepId`
 * and due `dueAfterMs` from now: all in one statement, so the runner sees them together (as one
 * event fanned out to many workflows leaves them).
 */
export async function insertDueExecutions(sql: (text: string, values?: unknown[]) => Promise<unknown>, groups: DueGroup[]): Promise<void> {
  const values: unknown[] = [];
  const param = (v: unknown) => `$${values.push(v)}`;
  const ctes = groups.map((g, i) => {
    const [project, tag] = [param(g.projectId), param(g.tag)];
    return `c${i} AS (
       INSERT INTO contacts (id, project_id, email, subscribed, data)
       SELECT 'cnt_' || ${tag} || '_' || n, ${project}, ${tag} || n || '@example.com', true, '{}' FROM generate_series(1, ${param(g.count)}::int) n RETURNING id
     ), x${i} AS (
       INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, due_at, started_at, updated_at)
       SELECT gen_random_uuid(), ${project}, ${param(g.workflowId)}, c${i}.id, 'RUNNING', ${param(g.stepId)},
              now() + ${param(g.dueAfterMs ?? 0)}::int * interval '1 millisecond', now(), now() FROM c${i}
     )`;
  });
  await sql(`WITH ${ctes.join(', ')} SELECT 1`, values);
}

/** Waits (30 s at most) until the project's one execution is COMPLETED; answers the milliseconds that took. */
export async function msUntilCompleted(sql: (text: string, values?: unknown[]) => Promise<{ status: string }[]>, projectId: string): Promise<number> {
  const started = performance.now();
  await waitFor(
    `project ${projectId}'s execution`,
    async () => (await sql(`SELECT status FROM workflow_executions WHERE project_id = $1`, [projectId]))[0]?.status === 'COMPLETED',
    30_000,
    20,
  );
  return Math.round(performance.now() - started);
}
