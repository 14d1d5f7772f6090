import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_EXECUTION_CONTEXT_BYTES } from '../src/modules/workflows/engine/enrol.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, waitFor } from './helpers/workflows.ts';

/**
 * An execution's context is at most 1 MB: an awaited event whose data would take it over resumes
 * the execution without merging it (the wait step's output says so). Unbounded, 199 waits could
 * grow one context to 50 MB, and the engine loads the contexts of every execution it claims.
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

const blob = (seed: number) => `${seed}:`.padEnd(240 * 1024, String.fromCharCode(97 + seed));

type Execution = {
  id: string;
  status: string;
  waitingFor: string | null;
  context: Record<string, string>;
  stepExecutions: { stepId: string; output: Record<string, unknown> | null }[];
};

test('waits merge their events’ data up to 1 MB of context; past it the execution goes on without it', { timeout: 120_000 }, async () => {
  const waits = ['p1', 'p2', 'p3', 'p4'];
  const wf = await buildWorkflow(b.sk, {
    eventName: 'start',
    steps: waits.map((name) => ({ key: name, type: 'WAIT_FOR_EVENT', config: { eventName: name } })),
    edges: [
      ['trigger', 'p1'],
      ['p1', 'p2', 'event'],
      ['p2', 'p3', 'event'],
      ['p3', 'p4', 'event'],
    ],
  });
  const email = 'waiter@example.com';
  const execution = async (): Promise<Execution | undefined> => {
    const list = await b.sk.get(`/workflows/${wf.id}/executions`);
    const id = list.body.data[0]?.id;
    return id ? (await b.sk.get<Execution>(`/workflows/${wf.id}/executions/${id}`)).body : undefined;
  };
  const track = async (event: string, key: string, seed: number) => {
    // One-off data: the event carries it, the contact does not keep it (its own 1 MB bound).
    const res = await b.sk.post('/events/track', { email, event, data: { [key]: { value: blob(seed), persistent: false } } });
    assert.equal(res.status, 200, res.text.slice(0, 300));
  };

  await track('start', 'a', 0);
  for (const [i, name] of waits.entries()) {
    await waitFor(`waiting for ${name}`, async () => (await execution())?.waitingFor === name);
    await track(name, 'bcde'[i], i + 1);
  }
  const done = await waitFor('completed', async () => {
    const e = await execution();
    return e?.status === 'COMPLETED' ? e : undefined;
  });

  // The start's data and three waits' fit (983 KB); the fourth's would make 1.2 MB.
  assert.deepEqual(Object.keys(done.context).sort(), ['a', 'b', 'c', 'd']);
  assert.equal(done.context.d === blob(3), true, 'the third wait’s data, whole');
  const printed = Buffer.byteLength(JSON.stringify(done.context).replace(/([,:])/g, '$1 '));
  assert.ok(printed <= MAX_EXECUTION_CONTEXT_BYTES && printed + 240 * 1024 > MAX_EXECUTION_CONTEXT_BYTES, `${printed} bytes`);
  const outputOf = (name: string) => done.stepExecutions.find((s) => s.stepId === wf.steps[name])?.output;
  for (const name of ['p1', 'p2', 'p3']) assert.equal(outputOf(name)?.dataMerged, undefined, name);
  assert.equal(outputOf('p4')?.dataMerged, false);
  assert.equal(outputOf('p4')?.eventName, 'p4');
  const stored = await b.sk.get('/events?name=p4');
  assert.equal(stored.body.total, 1, 'the event itself is stored');
});
