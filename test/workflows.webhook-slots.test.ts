import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, insertDueExecutions, msUntilCompleted, waitFor } from './helpers/workflows.ts';

/**
 * The runner makes at most 100 webhook calls at once, and at most 25 of one project
 * (workflows/jobs.ts); a webhook step with no free slot waits a second, and the runner goes on
 * with every other step meanwhile. Before, one project's calls to a receiver that hangs filled
 * all 100 slots and the runner waited for one of them to end (the 10 s timeout) before it
 * advanced anything, for every project.
 */

let server: TestServer;
let hostile: Bootstrapped;
let bystander: Bootstrapped;
const held: http.ServerResponse[] = [];
let mostAtOnce = 0;
let port = 0;
let answered = 0;
const receiver = http.createServer((req, res) => {
  if (req.url === '/quick') {
    answered++;
    res.writeHead(200).end('ok');
    return;
  }
  held.push(res);
  mostAtOnce = Math.max(mostAtOnce, held.filter((r) => !r.destroyed && !r.writableEnded).length);
});

before(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  port = (receiver.address() as AddressInfo).port;
  server = await startTestServer({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  hostile = await bootstrap(server.api, 'Hanging receiver');
  bystander = await bootstrap(server.api, 'Bystander');
});
after(async () => {
  for (const res of held) res.destroy();
  await server?.stop();
  await new Promise((resolve) => receiver.close(resolve));
});

test(
  "a project whose webhook receiver hangs holds 25 calls at most, and the runner goes on with other projects' executions",
  { timeout: 120_000 },
  async (t) => {
    const hook = await buildWorkflow(hostile.sk, {
      eventName: 'hang',
      steps: [{ key: 'w', type: 'WEBHOOK', config: { url: `http://127.0.0.1:${port}/hang` } }],
      edges: [['trigger', 'w']],
    });
    const quick = await buildWorkflow(bystander.sk, {
      eventName: 'quick',
      steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { done: true } } }],
      edges: [['trigger', 'u']],
    });
    await insertDueExecutions(server.sql, [{ projectId: hostile.project.id, workflowId: hook.id, stepId: hook.steps.trigger, count: 150, tag: 'hang' }]);
    await waitFor('the hostile project’s calls to hang', async () => held.length >= 25, 30_000);

    await insertDueExecutions(server.sql, [{ projectId: bystander.project.id, workflowId: quick.id, stepId: quick.steps.trigger, count: 1, tag: 'quick' }]);
    const bystanderMs = await msUntilCompleted(server.sql, bystander.project.id);
    t.diagnostic(`the bystander's execution COMPLETED ${bystanderMs} ms after it was due; ${held.length} calls held, at most ${mostAtOnce} at once`);
    assert.ok(bystanderMs < 3_000, `the bystander's execution took ${bystanderMs} ms (the hanging calls time out at 10 s)`);
    assert.equal(mostAtOnce, 25, 'one project holds 25 calls at most');
  },
);

test(
  'a project with many calls to a quick receiver keeps its 25 slots busy: a step waiting for a slot is due again as one frees',
  { timeout: 120_000 },
  async (t) => {
    const quickHooks = await bootstrap(server.api, 'Quick receiver');
    const hook = await buildWorkflow(quickHooks.sk, {
      eventName: 'sync',
      steps: [{ key: 'w', type: 'WEBHOOK', config: { url: `http://127.0.0.1:${port}/quick` } }],
      edges: [['trigger', 'w']],
    });
    const CALLS = 300;
    await insertDueExecutions(server.sql, [{ projectId: quickHooks.project.id, workflowId: hook.id, stepId: hook.steps.trigger, count: CALLS, tag: 'sync' }]);
    const started = performance.now();
    await waitFor(
      'every call',
      async () =>
        (
          await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM workflow_executions WHERE project_id = $1 AND status = 'COMPLETED'`, [
            quickHooks.project.id,
          ])
        )[0].n === CALLS,
      60_000,
      20,
    );
    const ms = Math.round(performance.now() - started);
    t.diagnostic(`${CALLS} calls to a quick receiver in ${ms} ms`);
    assert.equal(answered, CALLS, 'each call made once');
    // 25 at a time with each waiting step retried only a second later would take 12 s at least.
    assert.ok(ms < 8_000, `${CALLS} calls took ${ms} ms`);
  },
);
