import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { buildWorkflow } from './helpers/workflows.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { DELIVERY_QUEUE } from '../src/modules/emails/delivery/queue-name.ts';

/**
 * An idle worker process (API and worker together, as `npm start` runs it) asks PostgreSQL one
 * question a tick for all its queues and one for its workflows (jobs/due-queues.ts,
 * workflows/jobs.ts), not one per poller: 85 statements a second before, about 24 now. The count
 * is what Herald's connections send (every `pg` query of this process, as pg_stat_statements
 * would count them); work that arrives is still picked up.
 */

const sent: string[] = [];
/** The first parameter each statement of `sent` was given (a fetch's queue name). */
const firstParams: unknown[] = [];
const query = pg.Client.prototype.query;
// Counts, and passes on unchanged, every statement a pg client of this process sends.
pg.Client.prototype.query = function (this: pg.Client, ...args: Parameters<pg.Client['query']>) {
  const q = args[0] as unknown;
  sent.push(typeof q === 'string' ? q : ((q as { text?: string; name?: string })?.text ?? (q as { name?: string })?.name ?? '?'));
  const values = Array.isArray(args[1]) ? args[1] : (q as { values?: unknown[] })?.values;
  firstParams.push(values?.[0]);
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as pg.Client['query'];

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

const isProbe = (text: string) => /FROM unnest\(\$1::text\[\]\)/.test(text);
const isDeliveryFetch = (i: number) => /FROM pgboss\.job\s+WHERE name = \$1/.test(sent[i]) && firstParams[i] === DELIVERY_QUEUE;

/**
 * Three times: `queue(subject)` queues an email with that subject, which reaches the relay. Answers,
 * per email, the due-queues probe's statements between the COMMIT that queued it and the first
 * delivery fetch after that.
 */
async function probesBetweenCommitAndFetch(prefix: string, queue: (subject: string, i: number) => Promise<void>): Promise<number[]> {
  const probesBetween: number[] = [];
  for (let i = 0; i < 3; i++) {
    const from = sent.length;
    const subject = `${prefix} ${i}`;
    await queue(subject, i);
    const t0 = performance.now();
    const arrived = () => env.sink.messages.some((m) => m.parsed.subject === subject);
    while (!arrived() && performance.now() - t0 < 10_000) await sleep(10);
    assert.ok(arrived(), `${subject} reached the relay`);
    const queued = sent.findIndex((t, j) => j >= from && t.includes('INSERT INTO email_contents'));
    const committed = sent.findIndex((t, j) => j > queued && /^COMMIT\b/i.test(t.trim()));
    const fetched = sent.findIndex((_, j) => j > committed && isDeliveryFetch(j));
    assert.ok(queued >= 0 && committed > queued && fetched > committed, `statements: queued ${queued}, committed ${committed}, fetched ${fetched}`);
    probesBetween.push(sent.slice(committed, fetched).filter(isProbe).length);
    await sleep(300 + Math.random() * 200);
  }
  return probesBetween;
}

// Before, the probe's tick (every 250 ms) woke the pollers, so one always came between a commit
// and its fetch. A tick may still fall in the few milliseconds between them: two of three suffice.
const fetchedAtCommit = (probesBetween: number[]) =>
  assert.ok(probesBetween.filter((n) => n === 0).length >= 2, `probe statements between each commit and its fetch: ${probesBetween.join(', ')}`);

test('a send, a campaign’s test email and a workflow’s email are fetched for delivery as they commit, not at the next tick of the due-queues probe', async () => {
  const { sk, pk } = await bootstrap(env.server.api, 'Woken at commit');
  await verifyDomain(sk, env.dns, 'commit.example.test');
  await sleep(1000);
  fetchedAtCommit(
    await probesBetweenCommitAndFetch('Sent', async (subject, i) => {
      const res = await sk.post('/v1/send', { to: `commit${i}@example.com`, from: 'hello@commit.example.test', subject, body: '<p>hi</p>' });
      assert.equal(res.status, 200, res.text);
    }),
  );

  // A campaign's test email, which someone is waiting for in their inbox.
  fetchedAtCommit(
    await probesBetweenCommitAndFetch('[Test]', async (subject, i) => {
      const campaign = await sk.post('/campaigns', { name: subject, subject: String(i), body: '<p>news</p>', from: 'news@commit.example.test' });
      assert.equal(campaign.status, 201, campaign.text);
      const res = await sk.post(`/campaigns/${campaign.body.data.id}/test`, { email: `tested${i}@example.com` });
      assert.equal(res.status, 200, res.text);
    }),
  );

  // The runner's batch that queued a SEND_EMAIL step's email wakes a poller as it commits.
  const tpl = await sk.post('/templates', {
    name: 'Flow',
    subject: '{{ event.subject }}',
    body: '<p>flow</p>',
    from: 'flow@commit.example.test',
    type: 'TRANSACTIONAL',
  });
  assert.equal(tpl.status, 201, tpl.text);
  await buildWorkflow(sk, { eventName: 'go', steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } }], edges: [['trigger', 'mail']] });
  fetchedAtCommit(
    await probesBetweenCommitAndFetch('Flowed', async (subject, i) => {
      const res = await pk.post('/v1/track', { email: `flow${i}@example.com`, event: 'go', data: { subject } });
      assert.equal(res.status, 200, res.text);
    }),
  );
});
