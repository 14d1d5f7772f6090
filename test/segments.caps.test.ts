import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { MAX_SEGMENTS_PER_PROJECT, MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT } from '../src/modules/segments/caps.ts';

/**
 * `GET /segments` answers every segment of the project at once (the spec), so a project keeps at
 * most 1,000 segments whose conditions hold at most 8 MB in all (modules/segments/caps.ts): past
 * either, creating (or growing a condition) is 403 with `details.limit`, and nothing changes.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

/** A condition of about `kb` KB (at most 1,000): one `in` filter of `kb` values of 1,000 characters. */
const conditionOf = (kb: number, letter = 'x') => ({
  logic: 'AND',
  groups: [{ filters: [{ field: 'data.note', operator: 'in', value: Array.from({ length: kb }, (_, i) => `${i}`.padEnd(1000, letter)) }] }],
});

test('a project’s segment conditions hold at most 8 MB in all: a create or a PATCH past it is 403 and changes nothing', async () => {
  assert.equal(MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT, 8 * 1024 * 1024);
  const p = await bootstrap(server.api, 'segment bytes');
  const small = await p.sk.post('/segments', { name: 'Small', condition: conditionOf(10) });
  assert.equal(small.status, 201, small.text);
  for (let i = 0; i < 8; i++) {
    const res = await p.sk.post('/segments', { name: `Big ${i}`, condition: conditionOf(1_000) });
    assert.equal(res.status, 201, `${i}: ${res.text}`);
  }
  const refused = await p.sk.post('/segments', { name: 'One more', condition: conditionOf(400) });
  assert.equal(refused.status, 403, refused.text);
  assert.equal(refused.body.error.code, 'FORBIDDEN');
  assert.deepEqual(refused.body.error.details, { limit: MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT });
  assert.match(refused.body.error.message, /^A project's segment conditions can hold at most 8\.0 MB in all, and this one would take them to 8\.1 MB; /);
  const grown = await p.sk.patch(`/segments/${small.body.id}`, { condition: conditionOf(400) });
  assert.equal(grown.status, 403, grown.text);
  assert.equal((await p.sk.get(`/segments/${small.body.id}`)).body.condition.groups[0].filters[0].value.length, 10);

  // A segment's own condition is replaced, not added to; a STATIC segment holds none; room comes back with a delete.
  const list = (await p.sk.get('/segments')).body as { id: string; name: string }[];
  assert.equal(list.length, 9);
  const big = list.find((s) => s.name === 'Big 0')!;
  assert.equal((await p.sk.patch(`/segments/${big.id}`, { condition: conditionOf(1_000, 'y') })).status, 200);
  assert.equal((await p.sk.post('/segments', { name: 'Static', type: 'STATIC' })).status, 201);
  assert.equal((await p.sk.delete(`/segments/${big.id}`)).status, 204);
  assert.equal((await p.sk.post('/segments', { name: 'One more', condition: conditionOf(400) })).status, 201);
});

test('a project keeps at most 1,000 segments: the next create is 403 and creates nothing', async () => {
  assert.equal(MAX_SEGMENTS_PER_PROJECT, 1_000);
  const p = await bootstrap(server.api, 'segment count');
  await server.sql(
    `INSERT INTO segments (id, project_id, name, type, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'List ' || g, 'STATIC', now(), now() FROM generate_series(1, 999) g`,
    [p.project.id],
  );
  assert.equal((await p.sk.post('/segments', { name: 'The thousandth', type: 'STATIC' })).status, 201);
  for (const body of [
    { name: 'One too many', type: 'STATIC' },
    { name: 'One too many', condition: conditionOf(10) },
  ]) {
    const res = await p.sk.post('/segments', body);
    assert.equal(res.status, 403, res.text);
    assert.deepEqual([res.body.error.message, res.body.error.details], ['A project can have at most 1,000 segments; delete one first', { limit: 1_000 }]);
  }
  assert.equal(((await p.sk.get('/segments')).body as unknown[]).length, 1_000);
});
