import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CASCADE_DELETES_PER_PROCESS, WORKFLOW_DELETE_BATCH } from '../src/modules/workflows/delete.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { answeredWithin, answerOnceReleased, holdLock, within, statementWaitingOnALock } from './helpers/locks.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, waitFor } from './helpers/workflows.ts';

/**
 * DELETE /workflows/:id of a workflow with many executions deletes them in short batches before
 * the workflow row (modules/workflows/delete.ts), not in one cascading statement. To keep a delete
 * under way for as long as a test needs, another transaction holds the row lock of the workflow's
 * last execution: the delete waits at its last batch, with every earlier batch committed.
 */

let server: TestServer;
let a: Bootstrapped;
const CONTACTS = 3000;
const DEFAULT_BATCH = { ...WORKFLOW_DELETE_BATCH };
const contactId = (n: number) => `cnt_${n.toString(16).padStart(32, '0')}`;

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Workflow deletes');
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, created_at, updated_at)
     SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'c' || g || '@wd.test', true, now(), now() FROM generate_series(1, $2::int) AS g`,
    [a.project.id, CONTACTS],
  );
  // Small batches, so a few thousand executions take many.
  Object.assign(WORKFLOW_DELETE_BATCH, { first: 200, min: 50, max: 200 });
});
after(async () => server?.stop());
after(() => Object.assign(WORKFLOW_DELETE_BATCH, DEFAULT_BATCH));

/** An enabled workflow on `eventName` with `runs` finished executions (one per contact), each with two step executions, made in SQL. */
async function ranWorkflow(eventName: string, runs: number): Promise<string> {
  const wf = await buildWorkflow(a.sk, {
    eventName,
    steps: [{ key: 'update', type: 'UPDATE_CONTACT', config: { data: { seen: true } } }],
    edges: [['trigger', 'update']],
  });
  await server.sql(
    `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, context, started_at, completed_at, updated_at)
     SELECT gen_random_uuid(), $1, $2, 'cnt_' || lpad(to_hex(g), 32, '0'), 'COMPLETED', $4::uuid, '{}', now() - make_interval(secs => $3 - g), now(), now()
       FROM generate_series(1, $3::int) AS g`,
    [a.project.id, wf.id, runs, wf.steps.update],
  );
  await server.sql(
    `INSERT INTO workflow_step_executions (id, execution_id, workflow_id, step_id, project_id, status, started_at, completed_at)
     SELECT gen_random_uuid(), x.id, x.workflow_id, s.step_id, x.project_id, 'COMPLETED', x.started_at, x.started_at
       FROM workflow_executions AS x CROSS JOIN unnest(ARRAY[$2::uuid, $3::uuid]) AS s(step_id) WHERE x.workflow_id = $1`,
    [wf.id, wf.steps.trigger, wf.steps.update],
  );
  return wf.id;
}

const rowsOf = async (workflowId: string) =>
  (
    await server.sql<{ workflows: number; enabled: boolean | null; executions: number; steps: number; stepExecutions: number }>(
      `SELECT (SELECT count(*) FROM workflows WHERE id = $1)::int AS workflows, (SELECT enabled FROM workflows WHERE id = $1) AS enabled,
              (SELECT count(*) FROM workflow_executions WHERE workflow_id = $1)::int AS executions,
              (SELECT count(*) FROM workflow_steps WHERE workflow_id = $1)::int AS steps,
              (SELECT count(*) FROM workflow_step_executions WHERE workflow_id = $1)::int AS "stepExecutions"`,
      [workflowId],
    )
  )[0];

/** Holds the row lock of the workflow's last execution in another transaction; the returned function lets it go. */
const lockLastExecution = async (workflowId: string) =>
  (
    await holdLock(server.databaseUrl, 'SELECT id FROM workflow_executions WHERE workflow_id = $1 ORDER BY started_at DESC, id DESC LIMIT 1 FOR UPDATE', [
      workflowId,
    ])
  ).release;

const deleteWaitingOnALock = () => statementWaitingOnALock(server.sql, '%delete from%workflow%');

describe('DELETE /workflows/:id of a workflow with many executions', () => {
  test('disables it, deletes its executions in committed batches, refuses a second big delete with a 429, lets the project write meanwhile', async () => {
    const big = await ranWorkflow('wd.big', CONTACTS);
    const other = await ranWorkflow('wd.other', 1000);
    const unlock = await lockLastExecution(big);
    const deleting = a.sk.delete(`/workflows/${big}`);
    const done = await answerOnceReleased(unlock, deleting, async () => {
      await waitFor('the delete to wait for the locked last execution', deleteWaitingOnALock, 30_000);

      // Every batch before the last one is committed: at most one batch of executions is left, and
      // the workflow, disabled, takes no new entry.
      const during = await rowsOf(big);
      assert.ok(during.executions >= 1 && during.executions <= 200, `executions left while the last batch waits: ${during.executions} of ${CONTACTS}`);
      assert.equal(during.enabled, false);
      assert.equal(during.stepExecutions, 2 * during.executions, 'step executions went with their executions');

      const second = await answeredWithin(5_000, a.sk.delete(`/workflows/${other}`), 'a second big delete of the project waited instead of being refused');
      assert.equal(second.status, 429, second.text);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.equal(second.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.deepEqual(second.body.error.details, { retryAfter: 1, limit: 1 });
      assert.deepEqual(
        await rowsOf(other),
        { workflows: 1, enabled: true, executions: 1000, steps: 2, stepExecutions: 2000 },
        'the refused delete changed nothing',
      );

      // The trigger event of a new contact goes through at once and enrols nobody in the disabled workflow.
      const tracked = await answeredWithin(
        5_000,
        a.pk.post('/v1/track', { email: 'new@wd.test', event: 'wd.big' }),
        'an event of the trigger waited for the delete',
      );
      assert.equal(tracked.status, 200, tracked.text);
      const enrolled = await server.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM workflow_executions x JOIN contacts c ON c.id = x.contact_id WHERE c.email = 'new@wd.test'`,
      );
      assert.equal(enrolled[0].n, 0);

      // A contact whose execution went in an earlier batch is deleted at once.
      const contactGone = await answeredWithin(5_000, a.sk.delete(`/contacts/${contactId(2000)}`), 'a contact delete waited for the workflow delete');
      assert.equal(contactGone.status, 204, contactGone.text);
    });
    assert.equal(done.status, 204, done.text);
    assert.deepEqual(await rowsOf(big), { workflows: 0, enabled: null, executions: 0, steps: 0, stepExecutions: 0 });
    assert.equal((await a.sk.get(`/workflows/${big}`)).status, 404);

    // The slot is free again once the delete answered.
    const again = await a.sk.delete(`/workflows/${other}`);
    assert.equal(again.status, 204, again.text);
    assert.deepEqual(await rowsOf(other), { workflows: 0, enabled: null, executions: 0, steps: 0, stepExecutions: 0 });
  });

  test(`past ${CASCADE_DELETES_PER_PROCESS} big deletes under way in the process, another is a 429 before any change; a small workflow is deleted at once`, async () => {
    const big = await ranWorkflow('wd.busy', 500);
    const small = await ranWorkflow('wd.small', 150);
    const releases = Array.from({ length: CASCADE_DELETES_PER_PROCESS }, (_, i) => server.ctx.cascadeDeletes.take(`prj_elsewhere_${i}`));
    try {
      const refused = await a.sk.delete(`/workflows/${big}`);
      assert.equal(refused.status, 429, refused.text);
      assert.deepEqual(refused.body.error.details, { retryAfter: 1, limit: CASCADE_DELETES_PER_PROCESS });
      assert.match(refused.body.error.message, /busy deleting workflows and segments/);
      assert.deepEqual(await rowsOf(big), { workflows: 1, enabled: true, executions: 500, steps: 2, stepExecutions: 1000 });

      const deleted = await a.sk.delete(`/workflows/${small}`);
      assert.equal(deleted.status, 204, deleted.text);
      assert.deepEqual(await rowsOf(small), { workflows: 0, enabled: null, executions: 0, steps: 0, stepExecutions: 0 });
    } finally {
      for (const release of releases) release();
    }
    const done = await a.sk.delete(`/workflows/${big}`);
    assert.equal(done.status, 204, done.text);
  });

  test('active executions are still a 409 first, and nothing is deleted or disabled', async () => {
    const wf = await ranWorkflow('wd.active', 500);
    await server.sql(`UPDATE workflow_executions SET status = 'WAITING', completed_at = NULL WHERE contact_id = $1 AND workflow_id = $2`, [contactId(7), wf]);
    const refused = await a.sk.delete(`/workflows/${wf}`);
    assert.equal(refused.status, 409, refused.text);
    assert.deepEqual(refused.body.error.details, { activeExecutions: 1 });
    assert.deepEqual(await rowsOf(wf), { workflows: 1, enabled: true, executions: 500, steps: 2, stepExecutions: 1000 });
    await server.sql(`UPDATE workflow_executions SET status = 'CANCELLED' WHERE workflow_id = $1`, [wf]);
    const done = await a.sk.delete(`/workflows/${wf}`);
    assert.equal(done.status, 204, done.text);
  });

  test('a batch held past the 10 s bound stops the delete with a 409 saying how far it got; asked again, it finishes', { timeout: 60_000 }, async () => {
    const wf = await ranWorkflow('wd.held', 1000);
    const release = await lockLastExecution(wf);
    let stopped: Res | 'still waiting';
    try {
      stopped = await within(30_000, a.sk.delete(`/workflows/${wf}`));
    } finally {
      await release();
    }
    assert.ok(stopped !== 'still waiting', 'the delete waited for the held execution past its bound');
    assert.equal(stopped.status, 409, stopped.text);
    assert.equal(stopped.body.error.code, 'CONFLICT');
    const details = stopped.body.error.details;
    assert.equal(details.workflowId, wf);
    const left = await rowsOf(wf);
    assert.equal(details.deletedExecutions, 1000 - left.executions, 'the 409 counts the executions deleted');
    assert.ok(left.executions >= 1 && left.executions <= 200, `executions left: ${left.executions}`);
    assert.equal(left.enabled, false, 'the workflow stays, disabled');
    assert.match(stopped.body.error.message, /stopped after \d+ executions: .*at most 10 s\); ask again to finish/);
    const again = await a.sk.delete(`/workflows/${wf}`);
    assert.equal(again.status, 204, again.text);
    assert.deepEqual(await rowsOf(wf), { workflows: 0, enabled: null, executions: 0, steps: 0, stepExecutions: 0 });
  });
});
