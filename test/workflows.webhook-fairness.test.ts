import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, insertDueExecutions, msUntilCompleted, waitFor } from './helpers/workflows.ts';

/**
 * Four projects whose receivers hang hold all 100 webhook slots of the runner (25 each). A slot
 * given back goes to the waiting project with the fewest calls under way (workflows/engine/
 * webhook-slots.ts). Before, it went back to the project whose call ended, which had steps
 * waiting too: another project's webhook step waited until the hanging calls timed out (10 s).
 */

let server: TestServer;
const held = new Map<string, http.ServerResponse[]>(); // by project, from the URL
let holding = true;
const open = (list: http.ServerResponse[]) => list.filter((r) => !r.destroyed && !r.writableEnded);
const answer = (res: http.ServerResponse) => void (!res.destroyed && !res.writableEnded && res.writeHead(200).end('ok'));
let mostOfAProject = 0;
let mostInAll = 0;
let port = 0;
const receiver = http.createServer((req, res) => {
  const project = new URL(req.url ?? '/', 'http://x').searchParams.get('p');
  if (!project || !holding) return answer(res);
  const list = held.get(project) ?? [];
  held.set(project, [...list, res]);
  mostOfAProject = Math.max(mostOfAProject, open(held.get(project)!).length);
  mostInAll = Math.max(
    mostInAll,
    [...held.values()].reduce((n, l) => n + open(l).length, 0),
  );
});

before(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  port = (receiver.address() as AddressInfo).port;
  server = await startTestServer({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
});
after(async () => {
  holding = false;
  for (const list of held.values()) for (const res of list) res.destroy();
  await server?.stop();
  await new Promise((resolve) => receiver.close(resolve));
});

test(
  'when four projects’ hanging calls hold every slot, the first call to end lets another project’s waiting webhook step in',
  { timeout: 120_000 },
  async (t) => {
    const hanging = await Promise.all([1, 2, 3, 4].map((i) => bootstrap(server.api, `Hanging receiver ${i}`)));
    const groups = await Promise.all(
      hanging.map(async (p, i) => {
        const hook = await buildWorkflow(p.sk, {
          eventName: 'hang',
          steps: [{ key: 'w', type: 'WEBHOOK', config: { url: `http://127.0.0.1:${port}/hang?p=${i}` } }],
          edges: [['trigger', 'w']],
        });
        return { projectId: p.project.id, workflowId: hook.id, stepId: hook.steps.trigger, count: 40, tag: `hang${i}` };
      }),
    );
    await insertDueExecutions(server.sql, groups);
    await waitFor('every slot held', async () => [...held.values()].reduce((n, l) => n + open(l).length, 0) === 100, 30_000);

    const waiting = await bootstrap(server.api, 'Waiting for a slot');
    const quick = await buildWorkflow(waiting.sk, {
      eventName: 'quick',
      steps: [{ key: 'w', type: 'WEBHOOK', config: { url: `http://127.0.0.1:${port}/quick` } }],
      edges: [['trigger', 'w']],
    });
    await insertDueExecutions(server.sql, [{ projectId: waiting.project.id, workflowId: quick.id, stepId: quick.steps.trigger, count: 1, tag: 'quick' }]);
    // Its step was looked at, found no slot and waits.
    await waitFor(
      'the waiting project’s step',
      async () =>
        (
          await server.sql<{ status: string; current_step_id: string }>(`SELECT status, current_step_id FROM workflow_executions WHERE project_id = $1`, [
            waiting.project.id,
          ])
        )[0]?.current_step_id === quick.steps.w,
      30_000,
      20,
    );
    await new Promise((r) => setTimeout(r, 200));

    answer(open(held.get('0')!)[0]); // one hanging call of the first project ends
    const ms = await msUntilCompleted(server.sql, waiting.project.id);
    t.diagnostic(
      `the waiting project's webhook step COMPLETED ${ms} ms after the first hanging call ended; at most ${mostOfAProject} calls of a project, ${mostInAll} in all`,
    );
    assert.ok(ms < 3_000, `the waiting step took ${ms} ms after a slot was given back (the hanging calls time out at 10 s)`);
    assert.equal(mostOfAProject, 25);
    assert.equal(mostInAll, 100);
  },
);
