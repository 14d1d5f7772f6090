import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { recordStatements } from './helpers/statements.ts';
import { buildWorkflow, testClock, waitFor } from './helpers/workflows.ts';

/**
 * The workflow runner at rest (workflows/jobs.ts) asks every 500 ms when the next execution falls
 * due, and sleeps until a timer due within that window: a DELAY ends on time, not at the next poll.
 */

const sent = recordStatements().texts;
const clock = testClock();
let server: TestServer;
let p: Bootstrapped;

before(async () => {
  server = await startTestServer({}, { clock });
  p = await bootstrap(server.api, 'Rest timers');
});
after(() => server?.stop());

/** The runner's question, sent so far (its named statement's text). */
const probes = () => sent.filter((t) => /^SELECT x\.due_at FROM workflow_executions x/.test(t.trim())).length;

test("at rest, a DELAY ends at its due time, not at the runner's next poll", { timeout: 60_000 }, async (t) => {
  await buildWorkflow(p.sk, {
    eventName: 'rest.timer',
    steps: [
      { key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'minutes' } },
      { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { woken: true } } },
    ],
    edges: [
      ['trigger', 'wait'],
      ['wait', 'mark'],
    ],
  });
  const tracked = await p.pk.post('/v1/track', { email: 'timer@example.com', event: 'rest.timer' });
  assert.equal(tracked.status, 200, tracked.text);
  const contactId: string = tracked.body.data.contact;
  const dueAt = await waitFor('the execution at its DELAY', async () => {
    const [x] = await server.sql<{ status: string; due_at: Date }>(`SELECT status, due_at FROM workflow_executions WHERE contact_id = $1`, [contactId]);
    return x?.status === 'WAITING' && x.due_at;
  });
  // The runner polls every 50 ms for 10 s after its last claim (the enrolment), then every 500 ms.
  await sleep(11_000);
  const seen = probes();
  await waitFor('a question of the runner at rest', async () => probes() > seen, 5_000, 2);
  // Just after a question: the timer falls due 520 ms from now, 20 ms after the next one.
  clock.advance(dueAt.getTime() - clock.now().getTime() - 520);
  const dueReal = performance.now() + 520;
  await waitFor('the step after the DELAY', async () => (await p.sk.get(`/contacts/${contactId}`)).body?.data?.woken === true, 5_000, 10);
  const late = performance.now() - dueReal;
  t.diagnostic(`the DELAY ended ${Math.round(late)} ms after its due time`);
  // Polling every 500 ms alone would claim it a poll after that question: about 480 ms late.
  assert.ok(late < 300, `the DELAY ended ${Math.round(late)} ms after its due time`);
});
