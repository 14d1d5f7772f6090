import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type TestServer, createTestDatabase, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { buildWorkflow, testClock, waitFor } from './helpers/workflows.ts';
import { workerProcesses } from './helpers/worker-process.ts';

/** The invariants the workflow engine protects, each tested by name. */

const DOMAIN = 'inv.example.test';

async function trackAll(p: Bootstrapped, emails: string[], event: string): Promise<void> {
  for (let i = 0; i < emails.length; i += 25) {
    await Promise.all(
      emails.slice(i, i + 25).map(async (email) => {
        const res = await p.pk.post('/v1/track', { email, event });
        assert.equal(res.status, 200, res.text);
      }),
    );
  }
}

describe('a worker killed mid-batch', () => {
  let dns: TestDns;
  let sink: SmtpSink;
  let server: TestServer;
  let p: Bootstrapped;
  const workers = workerProcesses(() => ({
    databaseUrl: server.databaseUrl,
    smtpUrl: sink.url,
    dnsAddress: dns.address,
    env: { SEND_RATE_PER_SECOND: '1000', WORKFLOW_BATCH_SIZE: '50' },
  }));

  before(async () => {
    dns = await startTestDns();
    sink = await startSmtpSink();
    server = await startTestServer({ PROCESS_ROLE: 'api', DNS_SERVERS: dns.address, SMTP_URL: sink.url });
    p = await bootstrap(server.api, 'crash');
    await verifyDomain(p.sk, dns, DOMAIN);
  });
  after(async () => {
    await workers.killAll();
    await server?.stop();
    await sink?.stop();
    await dns?.stop();
  });

  test('a worker killed mid-batch: no step runs twice, no email is sent twice', { timeout: 480_000 }, async () => {
    const tpl = await p.sk.post('/templates', { name: 'Hi', subject: 'Hello {{email}}', body: '<p>hi</p>', from: `hi@${DOMAIN}`, type: 'TRANSACTIONAL' });
    assert.equal(tpl.status, 201, tpl.text);
    const wf = await buildWorkflow(p.sk, {
      eventName: 'crash_go',
      steps: [
        { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { marked: true } } },
        { key: 'check', type: 'CONDITION', config: { field: 'data.marked', operator: 'equals', value: true } },
        { key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } },
      ],
      edges: [
        ['trigger', 'mark'],
        ['mark', 'check'],
        ['check', 'mail', 'yes'],
      ],
    });
    const emails = Array.from({ length: 500 }, (_, i) => `w${String(i).padStart(3, '0')}@crash.test`);
    // Everyone enters first; then the worker advances the 500 executions, 50 per batch.
    await trackAll(p, emails, 'crash_go');
    const first = await workers.start();
    // Kill once some executions are through, while a batch holds its claim (row locks FOR UPDATE).
    const midBatch = await waitFor(
      'the first worker to be inside a batch with part of the work done',
      async () => {
        // A batch at work: one transaction holding its claim (RowShareLock on workflow_executions)
        // and having updated contacts (UPDATE_CONTACT steps), not yet committed.
        const [{ busy, done }] = await server.sql<{ busy: boolean; done: number }>(
          `SELECT EXISTS (
                    SELECT 1 FROM pg_locks a JOIN pg_class ca ON ca.oid = a.relation
                      JOIN pg_locks b ON b.pid = a.pid JOIN pg_class cb ON cb.oid = b.relation
                     WHERE ca.relname = 'workflow_executions' AND a.mode = 'RowShareLock'
                       AND cb.relname = 'contacts' AND b.mode = 'RowExclusiveLock') AS busy,
                  (SELECT count(*)::int FROM workflow_executions WHERE workflow_id = $1 AND status = 'COMPLETED') AS done`,
          [wf.id],
        );
        return busy && done >= 50;
      },
      90_000,
      2,
    );
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    assert.ok(midBatch);
    const [progress] = await server.sql<{ steps: number; done: number; queued: number }>(
      `SELECT (SELECT count(*)::int FROM workflow_step_executions WHERE workflow_id = $1) AS steps,
              (SELECT count(*)::int FROM workflow_executions WHERE workflow_id = $1 AND status = 'COMPLETED') AS done,
              (SELECT count(*)::int FROM emails WHERE workflow_id = $1) AS queued`,
      [wf.id],
    );
    const delivered = () => sink.messages.filter((m) => m.envelope.to[0].endsWith('@crash.test'));
    const claimed = await server.sql<{ to_email: string }>("SELECT to_email FROM emails WHERE workflow_id = $1 AND status = 'SENDING'", [wf.id]);
    const deliveredAtKill = new Set(delivered().map((m) => m.envelope.to[0]));
    // A message the relay accepted whose worker died before recording it is the one case that can
    // be sent twice (SMTP has no way to ask whether a message arrived): docs/decisions.md § Sending.
    const acceptedUnrecorded = claimed.map((r) => r.to_email).filter((e) => deliveredAtKill.has(e));
    console.log(
      `killed mid-batch with ${progress.done} executions done, ${progress.steps} step rows, ${progress.queued} emails queued, ` +
        `${claimed.length} claimed but not recorded (${acceptedUnrecorded.length} of them accepted)`,
    );
    assert.ok(progress.done < 500, 'the kill came before the work was done');

    await workers.start();
    await waitFor(
      'every execution to complete',
      async () => {
        const [{ n }] = await server.sql<{ n: number }>("SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = $1 AND status = 'COMPLETED'", [
          wf.id,
        ]);
        return n === 500;
      },
      180_000,
      200,
    );
    // Emails the killed worker had fetched or claimed wait for the delivery watchdog (a minute's
    // cron; an unrenewed claim lapses after 30 s): up to about a minute and a half after the kill.
    await waitFor('every email to arrive', async () => new Set(delivered().map((m) => m.envelope.to[0])).size >= 500, 240_000, 200);
    await new Promise((r) => setTimeout(r, 1000));

    const twice = await server.sql(
      'SELECT execution_id, step_id, count(*)::int AS n FROM workflow_step_executions WHERE workflow_id = $1 GROUP BY 1, 2 HAVING count(*) > 1',
      [wf.id],
    );
    assert.deepEqual(twice, [], 'no step ran twice');
    const [{ n: rows }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM workflow_step_executions WHERE workflow_id = $1', [wf.id]);
    assert.equal(rows, 500 * 4, 'trigger, update, condition and email: four step rows per execution');
    const [{ n: emailRows, contacts }] = await server.sql<{ n: number; contacts: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT contact_id)::int AS contacts FROM emails WHERE workflow_id = $1',
      [wf.id],
    );
    assert.equal(emailRows, 500, 'one email row per execution');
    assert.equal(contacts, 500);
    const counts = new Map<string, number>();
    for (const m of delivered()) for (const to of m.envelope.to) counts.set(to, (counts.get(to) ?? 0) + 1);
    assert.deepEqual(
      emails.filter((e) => !counts.has(e)),
      [],
      'every contact got a message',
    );
    assert.deepEqual(
      emails.filter((e) => counts.get(e)! > 1 && !acceptedUnrecorded.includes(e)),
      [],
      'no second message except where the relay had accepted one the killed worker had not yet recorded',
    );
  });
});

describe('timers across a restart', () => {
  test('a restart loses no timer', { timeout: 120_000 }, async () => {
    const clock = testClock();
    const databaseUrl = await createTestDatabase();
    let server = await startTestServer({}, { clock, databaseUrl });
    try {
      const p = await bootstrap(server.api, 'restart');
      const wf = await buildWorkflow(p.sk, {
        eventName: 'sleepy',
        steps: [
          { key: 'nap', type: 'DELAY', config: { amount: 1, unit: 'hours' } },
          { key: 'listen', type: 'WAIT_FOR_EVENT', config: { eventName: 'never_comes', timeout: 7200 } },
          { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { woke: true } } },
        ],
        edges: [
          ['trigger', 'nap'],
          ['nap', 'listen'],
          ['listen', 'mark', 'timeout'],
        ],
      });
      const emails = Array.from({ length: 60 }, (_, i) => `s${i}@restart.test`);
      await trackAll(p, emails, 'sleepy');
      const waiting = async (n: number) =>
        waitFor(`${n} waiting`, async () => {
          const [{ c }] = await server.sql<{ c: number }>("SELECT count(*)::int AS c FROM workflow_executions WHERE workflow_id = $1 AND status = 'WAITING'", [
            wf.id,
          ]);
          return c === n;
        });
      await waiting(60);

      // Down for the whole first timer: it falls due while no worker runs.
      await server.stop();
      clock.advance(60 * 60_000 + 1000);
      server = await startTestServer({}, { clock, databaseUrl });
      await waitFor('every DELAY to end and the waits to begin', async () => {
        const [{ c }] = await server.sql<{ c: number }>(
          "SELECT count(*)::int AS c FROM workflow_executions WHERE workflow_id = $1 AND status = 'WAITING' AND waiting_event = 'never_comes'",
          [wf.id],
        );
        return c === 60;
      });

      // Restart again mid-wait; the WAIT_FOR_EVENT timeouts fire after it.
      await server.stop();
      server = await startTestServer({}, { clock, databaseUrl });
      clock.advance(7200 * 1000 + 1000);
      const dueFrom = clock.now().getTime();
      await waitFor('every execution to complete', async () => {
        const [{ c }] = await server.sql<{ c: number }>("SELECT count(*)::int AS c FROM workflow_executions WHERE workflow_id = $1 AND status = 'COMPLETED'", [
          wf.id,
        ]);
        return c === 60;
      });
      // When the runner took the timers: the WAIT_FOR_EVENT rows complete with their batch's clock time.
      const [{ latest }] = await server.sql<{ latest: Date }>(
        'SELECT max(completed_at) AS latest FROM workflow_step_executions WHERE workflow_id = $1 AND step_id = $2',
        [wf.id, wf.steps.listen],
      );
      assert.ok(latest.getTime() - dueFrom < 2000, `the last timer fired ${latest.getTime() - dueFrom} ms after falling due`);
      const [{ c: woke }] = await server.sql<{ c: number }>(
        "SELECT count(*)::int AS c FROM contacts WHERE email LIKE '%@restart.test' AND (data->>'woke')::boolean",
        [],
      );
      assert.equal(woke, 60);
      const twice = await server.sql('SELECT execution_id, step_id FROM workflow_step_executions WHERE workflow_id = $1 GROUP BY 1, 2 HAVING count(*) > 1', [
        wf.id,
      ]);
      assert.deepEqual(twice, []);
    } finally {
      await server.stop();
    }
  });
});
