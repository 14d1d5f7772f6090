import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { holdLock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, insertDueExecutions, msUntilCompleted, waitFor } from './helpers/workflows.ts';

/**
 * A CONDITION step's database read runs inside the runner's batch transaction, beside every other
 * project's executions of the batch. It is bounded (engine/steps.ts): each statement at 2 s (the
 * execution then ends FAILED with the reason), and a project whose conditions took 1 s of a batch
 * leaves its next ones for a later batch. Before, a condition that read for as long as PostgreSQL
 * took (500 filters counting a million events each of a contact that has them) held the batch.
 *
 * A slow read is made deterministic by holding `segment_members` locked: a condition on a segment
 * reads it, the other project's workflow (an UPDATE_CONTACT) never does.
 */

let server: TestServer;
let hostile: Bootstrapped;
let bystander: Bootstrapped;

before(async () => {
  server = await startTestServer();
  hostile = await bootstrap(server.api, 'Slow conditions');
  bystander = await bootstrap(server.api, 'Bystander');
});
after(async () => server?.stop());

const SLOW = 5;

/** A CONDITION on a segment (which reads segment_members, held locked by the tests), then an update. */
async function slowWorkflow(p: Bootstrapped) {
  const segment = await p.sk.post('/segments', { name: 'Anyone', type: 'STATIC' });
  assert.equal(segment.status, 201, segment.text);
  return buildWorkflow(p.sk, {
    eventName: 'slow',
    steps: [
      { key: 'c', type: 'CONDITION', config: { field: `segment.${segment.body.id}`, operator: 'memberOf' } },
      { key: 'u', type: 'UPDATE_CONTACT', config: { data: { checked: true } } },
    ],
    edges: [
      ['trigger', 'c'],
      ['c', 'u', 'yes'],
      ['c', 'u', 'no'],
    ],
  });
}

const quickWorkflow = (p: Bootstrapped) =>
  buildWorkflow(p.sk, {
    eventName: 'quick',
    steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { done: true } } }],
    edges: [['trigger', 'u']],
  });

const countWithStatus = async (projectId: string, status: string): Promise<number> =>
  (await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM workflow_executions WHERE project_id = $1 AND status = $2`, [projectId, status]))[0].n;
const REASON = 'Evaluating the condition for this contact took longer than 2 s: use fewer or simpler filters';

test(
  "a project's slow CONDITION reads hold another project's execution for a batch's budget, not for as long as they take",
  { timeout: 120_000 },
  async (t) => {
    const slow = await slowWorkflow(hostile);
    const quick = await quickWorkflow(bystander);

    const lock = await holdLock(server.databaseUrl, 'LOCK TABLE segment_members IN ACCESS EXCLUSIVE MODE');
    let bystanderMs: number;
    try {
      // The slow project's executions due first, the bystander's just after: one commit, one batch.
      await insertDueExecutions(server.sql, [
        { projectId: hostile.project.id, workflowId: slow.id, stepId: slow.steps.trigger, count: SLOW, tag: 'slow' },
        { projectId: bystander.project.id, workflowId: quick.id, stepId: quick.steps.trigger, count: 1, tag: 'quick', dueAfterMs: 1 },
      ]);
      bystanderMs = await msUntilCompleted(server.sql, bystander.project.id);
      // Held past one statement's bound: at least one slow read was cancelled.
      await waitFor('a slow condition to be cancelled', async () => (await countWithStatus(hostile.project.id, 'FAILED')) > 0, 30_000);
    } finally {
      await lock.release();
    }
    t.diagnostic(`the bystander's execution COMPLETED ${bystanderMs} ms after it was due`);
    // One statement's bound (2 s) at most, then the slow project's budget for the batch is spent.
    assert.ok(bystanderMs < 5_000, `the bystander's execution took ${bystanderMs} ms (the lock was held until after it)`);

    // Every slow execution ended: FAILED with the reason while the lock was held, or run once it was gone.
    const ended = await waitFor(
      'the slow executions',
      async () => {
        const rows = await server.sql<{ status: string; error: string | null; steps: number }>(
          `SELECT x.status, x.error, (SELECT count(*)::int FROM workflow_step_executions s WHERE s.execution_id = x.id AND s.step_id = $2) AS steps
           FROM workflow_executions x WHERE x.project_id = $1`,
          [hostile.project.id, slow.steps.c],
        );
        return rows.every((r) => r.status === 'FAILED' || r.status === 'COMPLETED') ? rows : null;
      },
      30_000,
    );
    assert.equal(ended.length, SLOW);
    const failed = ended.filter((r) => r.status === 'FAILED');
    assert.ok(failed.length >= 1);
    for (const r of failed) assert.deepEqual({ error: r.error, steps: r.steps }, { error: REASON, steps: 1 });
    // A condition left for a later batch wrote no step row then: each ran exactly once.
    for (const r of ended.filter((x) => x.status === 'COMPLETED')) assert.deepEqual({ error: r.error, steps: r.steps }, { error: null, steps: 1 });

    // The failed step says why, through the API.
    const list = await hostile.sk.get(`/workflows/${slow.id}/executions?status=FAILED`);
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.data.length, failed.length);
    assert.equal(list.body.data[0].error, REASON);
  },
);

test(
  "once a project's CONDITION reads spent a batch's budget, its executions go to the runner's slow lane: another project's execution does not wait for them",
  { timeout: 120_000 },
  async (t) => {
    const slowProject = await bootstrap(server.api, 'Slow conditions, later');
    const other = await bootstrap(server.api, 'Another bystander');
    const slow = await slowWorkflow(slowProject);
    const quick = await quickWorkflow(other);
    const COUNT = 20;

    const lock = await holdLock(server.databaseUrl, 'LOCK TABLE segment_members IN ACCESS EXCLUSIVE MODE');
    let otherMs: number;
    try {
      await insertDueExecutions(server.sql, [
        { projectId: slowProject.project.id, workflowId: slow.id, stepId: slow.steps.trigger, count: COUNT, tag: 'later' },
      ]);
      // A batch spent the project's budget (a read cancelled at 2 s); its other executions are still due.
      await waitFor('a slow condition to be cancelled', async () => (await countWithStatus(slowProject.project.id, 'FAILED')) > 0, 30_000, 20);
      await insertDueExecutions(server.sql, [{ projectId: other.project.id, workflowId: quick.id, stepId: quick.steps.trigger, count: 1, tag: 'other' }]);
      otherMs = await msUntilCompleted(server.sql, other.project.id);
    } finally {
      await lock.release();
    }
    t.diagnostic(`the other project's execution COMPLETED ${otherMs} ms after it was due`);
    // Before, each batch took the slow project's due executions again, and one read of theirs (2 s) at least.
    assert.ok(otherMs < 1_000, `the other project's execution took ${otherMs} ms`);

    // The slow lane ends every one of them, once.
    await waitFor(
      'the slow executions',
      async () => (await countWithStatus(slowProject.project.id, 'FAILED')) + (await countWithStatus(slowProject.project.id, 'COMPLETED')) === COUNT,
      30_000,
    );
    const [{ rows, steps }] = await server.sql<{ rows: number; steps: number }>(
      `SELECT count(*)::int AS rows, count(DISTINCT execution_id)::int AS steps FROM workflow_step_executions WHERE project_id = $1 AND step_id = $2`,
      [slowProject.project.id, slow.steps.c],
    );
    assert.deepEqual({ rows, steps }, { rows: COUNT, steps: COUNT }, 'one CONDITION step row for each execution');
  },
);
