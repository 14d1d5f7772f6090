import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, insertDueExecutions, waitFor } from './helpers/workflows.ts';

/**
 * The runner claims due executions fairly between projects (engine/claim.ts): one project's
 * backlog does not hold another project's due execution back by more than a batch or so. The
 * runner used to claim oldest first across all projects, so another tenant's one-step workflow
 * waited behind the whole backlog (29–33 s behind 5 tracks fanned out to 5,000 workflows each).
 */

const BATCH = 100;
const BACKLOG = 3000;
let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer({ WORKFLOW_BATCH_SIZE: String(BATCH) });
  a = await bootstrap(server.api, 'Backlog');
  b = await bootstrap(server.api, 'Bystander');
});
after(async () => server?.stop());

const oneStep = (p: Bootstrapped, eventName: string) =>
  buildWorkflow(p.sk, { eventName, steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { done: true } } }], edges: [['trigger', 'u']] });

test("a project's backlog of due executions holds another project's execution back by a batch or so, not the backlog", { timeout: 300_000 }, async (t) => {
  const burst = await oneStep(a, 'burst');
  const signup = await oneStep(b, 'signup');

  // Project A: BACKLOG executions due now, as one event fanned out to many workflows leaves them;
  // project B: one execution due just after them (a signup tracked a moment later). One commit, so
  // the runner sees them together.
  await insertDueExecutions(server.sql, [
    { projectId: a.project.id, workflowId: burst.id, stepId: burst.steps.trigger, count: BACKLOG, tag: 'fair' },
    { projectId: b.project.id, workflowId: signup.id, stepId: signup.steps.trigger, count: 1, tag: 'bystander', dueAfterMs: 1 },
  ]);
  const started = performance.now();
  const done = await waitFor(
    "the bystander's execution",
    async () => {
      const [x] = await server.sql<{ status: string; completed_at: Date }>(`SELECT status, completed_at FROM workflow_executions WHERE project_id = $1`, [
        b.project.id,
      ]);
      return x?.status === 'COMPLETED' ? x : null;
    },
    240_000,
    20,
  );
  const bystanderMs = Math.round(performance.now() - started);
  const [{ before: aheadOfIt }] = await server.sql<{ before: number }>(
    `SELECT count(*)::int AS before FROM workflow_executions WHERE project_id = $1 AND completed_at <= $2`,
    [a.project.id, done.completed_at],
  );
  await waitFor(
    'the backlog',
    async () => {
      const [{ left }] = await server.sql<{ left: number }>(
        `SELECT count(*)::int AS left FROM workflow_executions WHERE project_id = $1 AND status = 'RUNNING'`,
        [a.project.id],
      );
      return left === 0;
    },
    240_000,
    100,
  );
  const backlogMs = Math.round(performance.now() - started);
  const detail = `${aheadOfIt} of the ${BACKLOG} backlog executions finished first; the bystander's took ${bystanderMs} ms, the backlog ${backlogMs} ms`;
  t.diagnostic(detail);
  // Oldest first, all of them finished first. Fairly: a first oldest-first batch (nothing showed
  // a backlog yet), batches the runner's other loops took meanwhile, and the one it goes in.
  assert.ok(aheadOfIt <= 5 * BATCH, detail);

  // Every backlog execution ran once (fair claims and the oldest-first fill never take one twice).
  const [{ completed, steps }] = await server.sql<{ completed: number; steps: number }>(
    `SELECT (SELECT count(*)::int FROM workflow_executions WHERE project_id = $1 AND status = 'COMPLETED') AS completed,
            (SELECT count(*)::int FROM workflow_step_executions WHERE project_id = $1 AND step_id = $2) AS steps`,
    [a.project.id, burst.steps.u],
  );
  assert.deepEqual({ completed, steps }, { completed: BACKLOG, steps: BACKLOG });
});
