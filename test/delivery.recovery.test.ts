import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { waitFor } from './helpers/workflows.ts';
import { workerProcesses } from './helpers/worker-process.ts';

const DOMAIN = 'stranded.example.test';
let mail: MailEnv;
let p: Bootstrapped;
const workers = workerProcesses(() => ({ databaseUrl: mail.server.databaseUrl, smtpUrl: mail.sink.url, dnsAddress: mail.dns.address }));

before(async () => {
  // The API alone: nothing is delivered until the test starts a worker.
  mail = await startMailEnv({ PROCESS_ROLE: 'api' });
  p = await bootstrap(mail.server.api, 'stranded');
  await verifyDomain(p.sk, mail.dns, DOMAIN);
});
after(async () => {
  await workers.killAll();
  await mail?.stop();
});

test('emails a dead worker held (fetched jobs, expired claims) are delivered once by the next worker within minutes', { timeout: 240_000 }, async () => {
  const recipients = Array.from({ length: 20 }, (_, i) => `s${String(i).padStart(2, '0')}@stranded.test`);
  const sent = await p.sk.post('/v1/send', { to: recipients, from: `hi@${DOMAIN}`, subject: 'Hi', body: '<p>hi</p>' });
  assert.equal(sent.status, 200, sent.text);
  const ids: string[] = sent.body.data.emails.map((e: { email: string }) => e.email);
  // What a worker killed mid-batch leaves behind: the delivery job fetched (active for a minute,
  // pg-boss would expire it only after ten), and half the emails claimed with a lease now expired.
  // The send's 20 emails share one job.
  const fetched = await mail.server.sql<{ names: string[] }>(
    `UPDATE pgboss.job SET state = 'active', started_on = now() - interval '1 minute'
      WHERE name = 'email-delivery' AND data->'emailIds' ?| $1::text[] RETURNING data->'emailIds' AS names`,
    [ids],
  );
  assert.deepEqual(
    fetched.map((j) => [...j.names].sort()),
    [[...ids].sort()],
  );
  const claimed = await mail.server.sql(
    `UPDATE emails SET status = 'SENDING', attempts = 1, locked_until = now() - interval '1 second'
      WHERE id = ANY($1::uuid[]) AND to_email < 's10' RETURNING id`,
    [ids],
  );
  assert.equal(claimed.length, 10);

  await workers.start();
  const delivered = () => mail.sink.messages.filter((m) => m.envelope.to[0].endsWith('@stranded.test'));
  // The watchdog runs every minute (pg-boss cron), so within two minutes of the worker's start.
  await waitFor('every stranded email to arrive', async () => new Set(delivered().map((m) => m.envelope.to[0])).size === 20, 150_000, 250);
  await new Promise((r) => setTimeout(r, 1000));
  assert.deepEqual(
    delivered()
      .map((m) => m.envelope.to[0])
      .sort(),
    recipients,
    'each recipient exactly once',
  );
  for (const id of [ids[0], ids[19]]) {
    const email = await p.sk.get(`/emails/${id}`);
    assert.equal(email.body.status, 'SENT', email.text);
  }
});
