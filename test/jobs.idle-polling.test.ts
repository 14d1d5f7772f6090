import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { recordStatements } from './helpers/statements.ts';

/**
 * An idle worker process (API and worker together, as `npm start` runs it) asks PostgreSQL one
 * question a tick for all its queues and one for its workflows (jobs/due-queues.ts,
 * workflows/jobs.ts), not one per poller: 85 statements a second before, about 24 now. The count
 * is what Herald's connections send (every `pg` query of this process, as pg_stat_statements
 * would count them); work that arrives is still picked up.
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
  assert.ok(perSecond < 40, `${perSecond.toFixed(1)} statements a second at rest: ${kinds.join(' | ')}`);
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
