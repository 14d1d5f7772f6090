import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { recordStatements } from './helpers/statements.ts';
import { startTestServer } from './helpers/server.ts';
import { buildWorkflow } from './helpers/workflows.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { loadConfig } from '../src/config.ts';
import { startRuntime } from '../src/runtime.ts';
import { CAMPAIGN_QUEUE } from '../src/modules/campaigns/queue-name.ts';
import { DELIVERY_QUEUE } from '../src/modules/emails/delivery/queue-name.ts';
import { SYSTEM_MAIL_QUEUE } from '../src/mail/system-mail.ts';
import { COMMIT_WAKE_MS } from '../src/jobs/commit-wakes.ts';

/**
 * An email queued by a request (or a workflow batch) is fetched for delivery as its transaction
 * commits (jobs/commit-wakes.ts), not at the next tick of the due-queues probe (every 250 ms):
 * by a poller of the same process, or through a notification by a worker process when the
 * request came to an API-only one. Seen in the order of the statements Herald sends.
 */

const statements = recordStatements();
const isProbe = (text: string) => /FROM unnest\(\$1::text\[\]\)/.test(text);
/** A poller's fetch of `queue` (Herald's batch poller and pg-boss's worker both ask `FROM pgboss.job WHERE name = $1`). */
const isFetch = (i: number, queue: string) => /FROM pgboss\.job\s+WHERE name = \$1/.test(statements.texts[i]) && statements.params[i][0] === queue;

// Statements to this test's database only: another test server may share the process.
/** The first statement to `database` after index `after` that `is` picks (-1 when none). */
const nextStatement = (database: string, after: number, is: (j: number) => boolean) =>
  statements.texts.findIndex((_, j) => j > after && statements.databases[j] === database && is(j));
/** The due-queues probe's statements to `database` between indexes `from` and `to`. */
const probesBetween = (database: string, from: number, to: number) =>
  statements.texts.slice(from, to).filter((t, k) => statements.databases[from + k] === database && isProbe(t)).length;

const isEmailInsert = (j: number) => statements.texts[j].includes('INSERT INTO email_contents');

/**
 * After index `after`, all to `database`: the statement `isQueued` picks, the COMMIT after it and
 * the first fetch of `queue` after that, asserted in that order. Answers the due-queues probe's
 * statements between the commit and the fetch, and the fetch's index.
 */
function fromCommitToFetch(database: string, after: number, isQueued: (j: number) => boolean, queue: string): { probes: number; fetched: number } {
  const queued = nextStatement(database, after, isQueued);
  const committed = nextStatement(database, queued, (j) => /^COMMIT\b/i.test(statements.texts[j].trim()));
  const fetched = nextStatement(database, committed, (j) => isFetch(j, queue));
  assert.ok(queued > after && committed > queued && fetched > committed, `statements: queued ${queued}, committed ${committed}, fetched ${fetched}`);
  return { probes: probesBetween(database, committed, fetched), fetched };
}

/** Waits (10 s at most) until the sink holds a message that `ok` picks. */
async function arrival(sink: SmtpSink, ok: (m: SmtpSink['messages'][number]) => boolean, what: string): Promise<void> {
  const t0 = performance.now();
  while (!sink.messages.some(ok) && performance.now() - t0 < 10_000) await sleep(10);
  assert.ok(sink.messages.some(ok), what);
}

/**
 * Three times: `queue(subject)` queues an email with that subject, which reaches the relay. Answers,
 * per email, the due-queues probe's statements between the COMMIT that queued it and the first
 * delivery fetch after that, all to `database`.
 */
async function probesBetweenCommitAndFetch(
  { sink, database }: { sink: SmtpSink; database: string },
  prefix: string,
  queue: (subject: string, i: number) => Promise<void>,
): Promise<number[]> {
  const counted: number[] = [];
  for (let i = 0; i < 3; i++) {
    const from = statements.texts.length;
    const subject = `${prefix} ${i}`;
    await queue(subject, i);
    await arrival(sink, (m) => m.parsed.subject === subject, `${subject} reached the relay`);
    counted.push(fromCommitToFetch(database, from - 1, isEmailInsert, DELIVERY_QUEUE).probes);
    await sleep(300 + Math.random() * 200);
  }
  return counted;
}

// Before, the probe's tick woke the pollers, so one always came between a commit and its fetch.
// A tick may still fall in the few milliseconds between them: two of three suffice.
const fetchedAtCommit = (probesBetween: number[]) =>
  assert.ok(probesBetween.filter((n) => n === 0).length >= 2, `probe statements between each commit and its fetch: ${probesBetween.join(', ')}`);

let env: MailEnv;
before(async () => {
  env = await startMailEnv();
});
const one = () => ({ sink: env.sink, database: new URL(env.server.databaseUrl).pathname.slice(1) });
after(async () => env?.stop());

test('one process: a send, a campaign’s test email and a workflow’s email are fetched for delivery as they commit', async () => {
  const { sk, pk } = await bootstrap(env.server.api, 'Woken at commit');
  await verifyDomain(sk, env.dns, 'commit.example.test');
  await sleep(1000);
  fetchedAtCommit(
    await probesBetweenCommitAndFetch(one(), 'Sent', async (subject, i) => {
      const res = await sk.post('/v1/send', { to: `commit${i}@example.com`, from: 'hello@commit.example.test', subject, body: '<p>hi</p>' });
      assert.equal(res.status, 200, res.text);
    }),
  );

  // A campaign's test email, which someone is waiting for in their inbox.
  fetchedAtCommit(
    await probesBetweenCommitAndFetch(one(), '[Test]', async (subject, i) => {
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
    await probesBetweenCommitAndFetch(one(), 'Flowed', async (subject, i) => {
      const res = await pk.post('/v1/track', { email: `flow${i}@example.com`, event: 'go', data: { subject } });
      assert.equal(res.status, 200, res.text);
    }),
  );
});

test('a campaign sent now: its job, then its emails, are fetched as they commit', async () => {
  const { database } = one();
  const { sk } = await bootstrap(env.server.api, 'Campaign at commit');
  await verifyDomain(sk, env.dns, 'camp-commit.example.test');
  const contact = await sk.post('/contacts', { email: 'reader@example.com' });
  assert.equal(contact.status, 201, contact.text);
  await sleep(1000);
  const jobProbes: number[] = [];
  const emailProbes: number[] = [];
  for (let i = 0; i < 3; i++) {
    const subject = `Campaign ${i}`;
    const created = await sk.post('/campaigns', { name: subject, subject, body: '<p>news</p>', from: 'news@camp-commit.example.test' });
    assert.equal(created.status, 201, created.text);
    const from = statements.texts.length;
    const sent = await sk.post(`/campaigns/${created.body.data.id}/send`, {});
    assert.equal(sent.status, 200, sent.text);
    await arrival(env.sink, (m) => m.parsed.subject === subject, `${subject} reached the relay`);

    // The send's transaction queues the campaign's job; a campaign worker fetches it. The job's
    // batch queues the email; a delivery poller fetches it.
    const isCampaignJob = (j: number) => statements.texts[j].includes('INSERT INTO pgboss.job') && statements.params[j].includes(CAMPAIGN_QUEUE);
    const job = fromCommitToFetch(database, from - 1, isCampaignJob, CAMPAIGN_QUEUE);
    jobProbes.push(job.probes);
    emailProbes.push(fromCommitToFetch(database, job.fetched, isEmailInsert, DELIVERY_QUEUE).probes);
    await sleep(300 + Math.random() * 200);
  }
  fetchedAtCommit(jobProbes);
  fetchedAtCommit(emailProbes);
});

test('an API process and a worker process: the API’s send is fetched by the worker as it commits (a notification)', async () => {
  const mail = { DNS_SERVERS: env.dns.address, SMTP_URL: env.sink.url, SEND_RATE_PER_SECOND: '1000' };
  const api = await startTestServer({ ...mail, PROCESS_ROLE: 'api' });
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-test-data-'));
  const worker = await startRuntime(
    loadConfig({
      ...mail,
      DATABASE_URL: api.databaseUrl,
      DATA_DIR: dataDir,
      JWT_SECRET: 'test-secret-0123456789abcdef',
      LOG_LEVEL: 'silent',
      PROCESS_ROLE: 'worker',
    }),
    { log: pino({ level: 'silent' }) },
  );
  try {
    const { sk } = await bootstrap(api.api, 'Notified at commit');
    await verifyDomain(sk, env.dns, 'split.example.test');
    await sleep(1000);
    fetchedAtCommit(
      await probesBetweenCommitAndFetch({ sink: env.sink, database: new URL(api.databaseUrl).pathname.slice(1) }, 'Split', async (subject, i) => {
        const res = await sk.post('/v1/send', { to: `split${i}@example.com`, from: 'hello@split.example.test', subject, body: '<p>hi</p>' });
        assert.equal(res.status, 200, res.text);
      }),
    );
  } finally {
    await worker.stop();
    await api.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('an account email (a password reset) is fetched by the system-mail worker as it is queued', async () => {
  const database = one().database;
  const counted: number[] = [];
  for (let i = 0; i < 3; i++) {
    const email = `reset${i}-${Date.now()}@example.test`;
    const until = (subject: string) => arrival(env.sink, (m) => m.envelope.to.includes(email) && m.parsed.subject === subject, `${subject} reached ${email}`);
    const signup = await env.server.api.post('/auth/signup', { email, password: 'correct horse battery' });
    assert.equal(signup.status, 201, signup.text);
    await until('Confirm your email address');
    // The confirmation's own wake of the queue was just now: a wake within COMMIT_WAKE_MS of it
    // waits for the window's end (throttledWakes), which a probe tick could then fall into.
    await sleep(COMMIT_WAKE_MS + 50);

    const from = statements.texts.length;
    const asked = await env.server.api.post('/auth/request-password-reset', { email });
    assert.equal(asked.status, 200, asked.text);
    await until('Reset your Herald password');
    // pg-boss's insert commits on its own: the statement that queued the job is its commit.
    const queued = nextStatement(
      database,
      from - 1,
      (j) => statements.texts[j].includes('INSERT INTO pgboss.job') && statements.params[j].includes(SYSTEM_MAIL_QUEUE),
    );
    const fetched = nextStatement(database, queued, (j) => isFetch(j, SYSTEM_MAIL_QUEUE));
    assert.ok(queued >= 0 && fetched > queued, `statements: queued ${queued}, fetched ${fetched}`);
    counted.push(probesBetween(database, queued, fetched));
    await sleep(300 + Math.random() * 200);
  }
  fetchedAtCommit(counted);
});
