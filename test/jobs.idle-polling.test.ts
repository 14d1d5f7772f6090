import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { recordStatements } from './helpers/statements.ts';
import { buildWorkflow, waitFor } from './helpers/workflows.ts';

/**
 * An idle worker process (API and worker together, as `npm start` runs it) asks PostgreSQL one
 * question a tick for all its queues (jobs/due-queues.ts, every 250 ms) and, at rest, one every
 * 500 ms for its workflows (workflows/jobs.ts), not one per poller: 85 statements a second before
 * the twenty-fourth session, 24 before the thirty-second (the workflows' every 50 ms), about 6 now.
 * The count is what Herald's connections send (every `pg` query of this process, as
 * pg_stat_statements would count them); work that arrives is still picked up.
 */

const sent = recordStatements().texts;

let env: MailEnv;
before(async () => {
  env = await startMailEnv();
});
after(async () => env?.stop());

test('an idle worker sends PostgreSQL a few statements a second, and a send is still delivered', async () => {
  const { sk } = await bootstrap(env.server.api, 'Idle polling');
  await verifyDomain(sk, env.dns, 'idle.example.test');
  await sleep(3000); // start-up, sign-up and the domain's verification settle
  const from = sent.length;
  const started = performance.now();
  await sleep(5000);
  const seconds = (performance.now() - started) / 1000;
  const idle = sent.slice(from);
  const perSecond = idle.length / seconds;
  const first = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 40);
  const kinds = [...new Set(idle.map(first))];
  assert.ok(perSecond < 12, `${perSecond.toFixed(1)} statements a second at rest: ${kinds.join(' | ')}`);
  // The workflow runner at rest: one question every 500 ms (every 50 ms before: 100 in 5 s).
  const workflowProbes = idle.filter((t) => /FROM workflow_executions/.test(t)).length;
  assert.ok(workflowProbes >= 5 && workflowProbes <= 15, `${workflowProbes} workflow probes in ${seconds.toFixed(1)} s at rest`);
  // No transaction is opened to claim nothing, and no queue's poller fetches for itself (a job
  // of the sign-up or the domain's verification may still be due in the window: a few at most).
  // Before: the runner's transaction every 50 ms (100 in 5 s), 19 pollers' fetches (about 120).
  const transactions = idle.filter((t) => /^BEGIN\b/i.test(t.trim())).length;
  const fetches = idle.filter((t) => /FROM pgboss\.job\s+WHERE name = \$1/.test(t)).length;
  assert.ok(transactions <= 5, `${transactions} transactions at rest: ${kinds.join(' | ')}`);
  assert.ok(fetches <= 5, `${fetches} fetches by queue pollers at rest`);

  const t0 = performance.now();
  const res = await sk.post('/v1/send', { to: 'idle@example.com', from: 'hello@idle.example.test', subject: 'Woken', body: '<p>hi</p>' });
  assert.equal(res.status, 200, res.text);
  const woken = () => env.sink.messages.filter((m) => m.parsed.subject === 'Woken');
  while (woken().length === 0 && performance.now() - t0 < 10_000) await sleep(20);
  assert.equal(woken().length, 1, 'the email reached the relay');
});

test('a workflow triggered at rest runs its steps within a poll', async () => {
  const p = await bootstrap(env.server.api, 'Idle workflows');
  const wf = await buildWorkflow(p.sk, {
    eventName: 'idle.woken',
    steps: [{ key: 'update', type: 'UPDATE_CONTACT', config: { data: { woken: true } } }],
    edges: [['trigger', 'update']],
  });
  await sleep(1000); // at rest: nothing has been claimed in this process
  const t0 = performance.now();
  const tracked = await p.pk.post('/v1/track', { email: 'woken@example.com', event: 'idle.woken' });
  assert.equal(tracked.status, 200, tracked.text);
  assert.ok(tracked.body.data.contact, tracked.text);
  const contact = await waitFor(
    'the UPDATE_CONTACT step',
    async () => {
      const res = await p.sk.get(`/contacts/${tracked.body.data.contact}`);
      return res.body?.data?.woken === true && res.body;
    },
    5_000,
    20,
  );
  const ms = performance.now() - t0;
  assert.equal(contact.data.woken, true);
  // One idle poll (500 ms) and a batch, with room for a loaded machine.
  assert.ok(ms < 3_000, `the step ran ${Math.round(ms)} ms after the track (workflow ${wf.id})`);
});
