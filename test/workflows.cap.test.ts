import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow } from './helpers/workflows.ts';

/**
 * One event enrols its contact in every enabled workflow its name triggers, so the workflows of a
 * project, and the enabled ones of a trigger, are capped: 100 per project, 20 enabled per trigger
 * (403 FORBIDDEN with details.limit, like the domain cap). Concurrent requests stop exactly there.
 */

let server: TestServer;

before(async () => {
  server = await startTestServer({ PROCESS_ROLE: 'api' });
});
after(async () => server?.stop());

const statuses = (answers: { status: number }[]) => answers.map((r) => r.status).sort();

/** A runnable workflow (one UPDATE_CONTACT step), disabled. */
const runnable = (p: Bootstrapped, eventName: string) =>
  buildWorkflow(p.sk, {
    eventName,
    steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { seen: true } } }],
    edges: [['trigger', 'u']],
    enabled: false,
  });

async function enabledOn(p: Bootstrapped, eventName: string): Promise<number> {
  const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM workflows WHERE project_id = $1 AND event_name = $2 AND enabled', [
    p.project.id,
    eventName,
  ]);
  return n;
}

describe('workflows per project', () => {
  test('at most 100: concurrent creates stop exactly there (403 with details.limit), and deleting one makes room', async () => {
    const p = await bootstrap(server.api, 'Many workflows');
    const answers = await Promise.all(Array.from({ length: 110 }, (_, i) => p.sk.post('/workflows', { name: `w${i}`, eventName: `e${i % 7}` })));
    assert.deepEqual(statuses(answers), [...Array(100).fill(201), ...Array(10).fill(403)]);
    const refused = answers.find((r) => r.status === 403)!;
    assert.equal(refused.body.error.code, 'FORBIDDEN');
    assert.equal(refused.body.error.message, 'A project can have at most 100 workflows; delete one first');
    assert.deepEqual(refused.body.error.details, { limit: 100 });
    const list = await p.sk.get('/workflows?pageSize=1');
    assert.equal(list.body.total, 100);

    const created = answers.find((r) => r.status === 201)!;
    assert.equal((await p.sk.delete(`/workflows/${created.body.id}`)).status, 204);
    assert.equal((await p.sk.post('/workflows', { name: 'one more', eventName: 'e0' })).status, 201);
    assert.equal((await p.sk.post('/workflows', { name: 'one too many', eventName: 'e0' })).status, 403);

    // Another project has its own 100.
    const other = await bootstrap(server.api, 'Other project');
    assert.equal((await other.sk.post('/workflows', { name: 'first', eventName: 'e0' })).status, 201);
  });
});

describe('enabled workflows per trigger', () => {
  test('at most 20 enabled on one event name: concurrent enables stop exactly there; other triggers and disabling make room', async () => {
    const p = await bootstrap(server.api, 'One trigger');
    const built = [];
    for (let i = 0; i < 25; i++) built.push(await runnable(p, 'signed_up'));
    const answers = await Promise.all(built.map((w) => p.sk.patch(`/workflows/${w.id}`, { enabled: true })));
    assert.deepEqual(statuses(answers), [...Array(20).fill(200), ...Array(5).fill(403)]);
    const refused = answers.find((r) => r.status === 403)!;
    assert.equal(refused.body.error.code, 'FORBIDDEN');
    assert.equal(refused.body.error.message, 'At most 20 enabled workflows can have the trigger "signed_up"; disable one of them first');
    assert.deepEqual(refused.body.error.details, { limit: 20 });
    assert.equal(await enabledOn(p, 'signed_up'), 20);
    const off = built.filter((_, i) => answers[i].status === 403);
    const on = built.filter((_, i) => answers[i].status === 200);

    // A refused workflow stays as it was: disabled, on its trigger.
    const still = await p.sk.get(`/workflows/${off[0].id}`);
    assert.equal(still.body.enabled, false);
    assert.equal(still.body.eventName, 'signed_up');

    // An enabled workflow cannot move onto the full trigger either; a disabled one may (it starts nothing).
    const elsewhere = await runnable(p, 'ordered');
    assert.equal((await p.sk.patch(`/workflows/${elsewhere.id}`, { enabled: true })).status, 200);
    const moved = await p.sk.patch(`/workflows/${elsewhere.id}`, { eventName: 'signed_up' });
    assert.equal(moved.status, 403, moved.text);
    assert.deepEqual(moved.body.error.details, { limit: 20 });
    assert.equal((await p.sk.get(`/workflows/${elsewhere.id}`)).body.eventName, 'ordered');
    const movedDisabled = await p.sk.patch(`/workflows/${off[1].id}`, { eventName: 'ordered' });
    assert.equal(movedDisabled.status, 200, movedDisabled.text);
    assert.equal((await p.sk.patch(`/workflows/${off[1].id}`, { eventName: 'signed_up', enabled: true })).status, 403);

    // An enabled one can be renamed, and disabling one makes room for another.
    assert.equal((await p.sk.patch(`/workflows/${on[0].id}`, { name: 'renamed' })).status, 200);
    assert.equal((await p.sk.patch(`/workflows/${on[0].id}`, { enabled: false })).status, 200);
    assert.equal((await p.sk.patch(`/workflows/${off[0].id}`, { enabled: true })).status, 200);
    assert.equal((await p.sk.patch(`/workflows/${off[2].id}`, { enabled: true })).status, 403);
    assert.equal(await enabledOn(p, 'signed_up'), 20);
  });

  test('segment triggers count the same way', async () => {
    const p = await bootstrap(server.api, 'Segment trigger');
    const answers = [];
    for (let i = 0; i < 21; i++) {
      const w = await runnable(p, 'segment.vip.entry');
      answers.push(await p.sk.patch(`/workflows/${w.id}`, { enabled: true }));
    }
    assert.deepEqual(
      answers.map((r) => r.status),
      [...Array(20).fill(200), 403],
    );
    assert.deepEqual(answers[20].body.error.details, { limit: 20 });
    // The exit of the same segment is another trigger.
    const exit = await runnable(p, 'segment.vip.exit');
    assert.equal((await p.sk.patch(`/workflows/${exit.id}`, { enabled: true })).status, 200);
  });

  test('workflows past the caps from before them keep working: listed, edited, enrolling', async () => {
    const p = await bootstrap(server.api, 'Grandfathered');
    const first = await buildWorkflow(p.sk, {
      eventName: 'legacy',
      steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { seen: true } } }],
      edges: [['trigger', 'u']],
    });
    // 119 more enabled copies on the same trigger, written as the data was before the caps.
    await server.sql(
      `WITH g AS (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 119) i),
            w AS (INSERT INTO workflows (id, project_id, name, event_name, enabled) SELECT g.id, $1, 'copy ' || g.i, 'legacy', true FROM g RETURNING id)
       INSERT INTO workflow_steps (id, workflow_id, project_id, type, name, config) SELECT gen_random_uuid(), w.id, $1, 'TRIGGER', 'Trigger', '{}' FROM w`,
      [p.project.id],
    );
    assert.equal((await p.sk.get('/workflows?pageSize=1')).body.total, 120);
    assert.equal((await p.sk.patch(`/workflows/${first.id}`, { name: 'still editable', allowReentry: true })).status, 200);
    assert.equal((await p.sk.post('/workflows', { name: 'new', eventName: 'x' })).status, 403);
    const track = await p.pk.post('/v1/track', { email: 'old@example.com', event: 'legacy' });
    assert.equal(track.status, 200, track.text);
    const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM workflow_executions WHERE project_id = $1', [p.project.id]);
    assert.equal(n, 120);
    // Re-enabling one of them after disabling it is subject to the cap.
    assert.equal((await p.sk.patch(`/workflows/${first.id}`, { enabled: false })).status, 200);
    assert.equal((await p.sk.patch(`/workflows/${first.id}`, { enabled: true })).status, 403);
  });
});
