import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_WORKFLOW_CONFIG_BYTES } from '../src/modules/workflows/graph.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A workflow's steps hold at most 2 MB of configuration: the engine loads the whole graph for each
 * batch, and GET /workflows/:id answers it. 199 CONDITION steps of 900 KB had been a 179 MB answer
 * (2 s of the event loop, +1.1 GB), and ten at once ran the process out of memory.
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

/** A CONDITION config of about 800 KB as PostgreSQL prints it. */
const condition = (seed: number) => ({
  logic: 'AND',
  groups: [
    {
      filters: Array.from({ length: 400 }, (_, f) => ({
        field: `data.f${f % 50}`,
        operator: 'in',
        value: Array.from({ length: 130 }, (_, v) => `${seed}-${f}-${v}`.padEnd(12, 'x')),
      })),
    },
  ],
});

test('steps past 2 MB of configuration are refused, and nothing is added or changed', async () => {
  const wf = await b.sk.post('/workflows', { name: 'big', eventName: 'signup' });
  assert.equal(wf.status, 201, wf.text);
  const id = wf.body.id;
  const add = (config: unknown) => b.sk.post(`/workflows/${id}/steps`, { type: 'CONDITION', config });
  const small = await add({ field: 'data.plan', operator: 'equals', value: 'pro' });
  assert.equal(small.status, 201, small.text);
  const big = await add(condition(1));
  assert.equal(big.status, 201, big.text.slice(0, 300));
  const second = await add(condition(2));
  assert.equal(second.status, 201, second.text.slice(0, 300));

  const third = await add(condition(3));
  assert.equal(third.status, 400, third.text.slice(0, 300));
  assert.equal(third.body.error.code, 'BAD_REQUEST');
  assert.match(
    third.body.error.message,
    /^A workflow's steps can hold at most 2\.0 MB of configuration, and this would make 2\.\d MB: shorten its conditions or split the workflow$/,
  );
  assert.equal(third.body.error.details.maxBytes, MAX_WORKFLOW_CONFIG_BYTES);
  assert.ok(third.body.error.details.bytes > MAX_WORKFLOW_CONFIG_BYTES);

  // A step made larger counts its new size; replacing one counts it once.
  const grown = await b.sk.patch(`/workflows/${id}/steps/${small.body.id}`, { config: condition(4) });
  assert.equal(grown.status, 400, grown.text.slice(0, 300));
  const replaced = await b.sk.patch(`/workflows/${id}/steps/${second.body.id}`, { config: condition(5) });
  assert.equal(replaced.status, 200, replaced.text.slice(0, 300));

  const stored = await b.sk.get(`/workflows/${id}`);
  assert.equal(stored.status, 200);
  assert.equal(stored.body.steps.length, 4, 'the trigger and three conditions');
  const byId = new Map(stored.body.steps.map((s: { id: string; config: unknown }) => [s.id, s.config]));
  assert.deepEqual(byId.get(second.body.id), condition(5));
  assert.deepEqual(byId.get(small.body.id), { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] });
  const delay = await b.sk.post(`/workflows/${id}/steps`, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
  assert.equal(delay.status, 201, delay.text);

  // A workflow made larger before the bound (written here directly) can shrink, not grow.
  await server.sql(`UPDATE workflow_steps SET config = $1::jsonb WHERE id = $2::uuid`, [
    JSON.stringify({ logic: 'OR', groups: [...condition(6).groups, ...condition(7).groups] }),
    small.body.id,
  ]);
  const shrunk = await b.sk.patch(`/workflows/${id}/steps/${small.body.id}`, { config: condition(8) });
  assert.equal(shrunk.status, 200, shrunk.text.slice(0, 300));
  const regrown = await b.sk.patch(`/workflows/${id}/steps/${small.body.id}`, { config: { ...condition(8), logic: 'OR' } });
  assert.equal(regrown.status, 200, 'no larger than now');
  const more = await b.sk.post(`/workflows/${id}/steps`, { type: 'DELAY', config: { amount: 2, unit: 'days' } });
  assert.equal(more.status, 400, more.text.slice(0, 300));
});
