import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { rebuildOutcomeRollups } from '../src/modules/analytics/outcome-rollups.ts';
import { evaluateActiveProjects } from '../src/modules/reputation/guard.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';

const STOPPED = 'Not sent: the project was disabled because its bounce or complaint rate is too high (EMAIL_REPUTATION)';
let dir: string;
let signingKey: string;
let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let domainCount = 0;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'herald-rep-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=test',
      '-days',
      '1',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  signingKey = readFileSync(path.join(dir, 'key.pem'), 'utf8');
  ({ dns, sink, server } = await startMailEnv({ SNS_TRUSTED_CERT_FILE: path.join(dir, 'cert.pem'), SNS_TOPIC_ARNS: 'arn:aws:sns:us-east-1:123456789012:ses' }));
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Project = Bootstrapped & { from: string };

async function project(name: string): Promise<Project> {
  const p = await bootstrap(server.api, name);
  const domain = `r${++domainCount}.example.test`;
  await verifyDomain(p.sk, dns, domain);
  return { ...p, from: `news@${domain}` };
}

/** Stored emails as fixtures: `count` of them in `status`, created `daysAgo`. */
async function fixtures(projectId: string, count: number, status: string, daysAgo = 0) {
  await server.sql(
    `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'b') RETURNING id)
     INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status, created_at, updated_at,
                         sent_at, bounced_at, complained_at)
     SELECT gen_random_uuid(), $1, 'fixture-' || md5(random()::text) || '@example.net', 'news@example.net', 'MARKETING', 's', (SELECT id FROM c), $3,
            now() - make_interval(days => $4), now(),
            CASE WHEN $3 <> 'QUEUED' THEN now() - make_interval(days => $4) END,
            CASE WHEN $3 = 'BOUNCED' THEN now() - make_interval(days => $4) END,
            CASE WHEN $3 = 'COMPLAINED' THEN now() - make_interval(days => $4) END
       FROM generate_series(1, $2)`,
    [projectId, count, status, daysAgo],
  );
  // Written around emails/lifecycle.ts: count them into the outcome summary the rates are read from.
  await rebuildOutcomeRollups(server.ctx.database.db, projectId);
}

async function sentEmail(p: Project, to: string) {
  const res = await p.sk.post('/v1/send', { to, from: p.from, subject: 'Hi', body: '<p>b</p>', subscribed: true });
  assert.equal(res.status, 200, res.text);
  const email = await waitForStatus(p.sk, res.body.data.emails[0].email, ['SENT']);
  return { id: email.id as string, messageId: email.messageId as string };
}

/** An SES notification about `messageId`, signed as SNS would, posted to the webhook. */
async function sesNotification(type: 'Bounce' | 'Complaint', messageId: string, to: string, from: string) {
  const detail =
    type === 'Bounce'
      ? { bounce: { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: to }], timestamp: new Date().toISOString() } }
      : { complaint: { complainedRecipients: [{ emailAddress: to }], timestamp: new Date().toISOString() } };
  const fields: Record<string, string> = {
    Type: 'Notification',
    MessageId: randomUUID(),
    TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses',
    Message: JSON.stringify({
      notificationType: type,
      mail: { source: from, destination: [to], headers: [{ name: 'Message-ID', value: messageId }] },
      ...detail,
    }),
    Timestamp: new Date().toISOString(),
  };
  const canonical = ['Message', 'MessageId', 'Timestamp', 'TopicArn', 'Type'].map((k) => `${k}\n${fields[k]}\n`).join('');
  const message = {
    ...fields,
    SignatureVersion: '2',
    Signature: sign('sha256', Buffer.from(canonical), signingKey).toString('base64'),
    SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem',
  };
  const res = await server.api.post('/webhooks/notifications', undefined, {
    raw: JSON.stringify(message),
    headers: { 'content-type': 'text/plain; charset=UTF-8' },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.status, 'processed');
}

const security = (p: Project) => server.api.get(`/users/@me/projects/${p.project.id}/security`, { cookie: p.cookie });

describe('the reputation guard', () => {
  test('a bounce through the webhook that makes the rate critical disables the project and stops its queued sends', async () => {
    const p = await project('bouncy');
    await fixtures(p.project.id, 175, 'DELIVERED');
    await fixtures(p.project.id, 15, 'BOUNCED');
    await fixtures(p.project.id, 3, 'QUEUED');
    const real = await sentEmail(p, 'will-bounce@example.org');

    // 15 of 191 sent emails bounced: 7.85 %, a warning on both windows.
    const warn = await security(p);
    assert.equal(warn.status, 200, warn.text);
    assert.equal(warn.body.status, 'warning');
    assert.deepEqual(warn.body.bounceRate, { last7Days: 7.8534, allTime: 7.8534, level: 'warning' });
    assert.deepEqual(warn.body.complaintRate, { last7Days: 0, allTime: 0, level: 'ok' });
    assert.equal(warn.body.sentLast7Days, 191);
    assert.equal(warn.body.sentAllTime, 191);
    assert.equal(warn.body.disabled, false);
    assert.equal(warn.body.disabledReason, null);
    assert.deepEqual(warn.body.recentSuspensions, []);

    // One more hard bounce: 16 of 191 = 8.38 % ≥ the all-time critical 8 %.
    await sesNotification('Bounce', real.messageId, 'will-bounce@example.org', p.from);

    const report = await security(p);
    assert.equal(report.body.status, 'critical');
    assert.deepEqual(report.body.bounceRate, { last7Days: 8.377, allTime: 8.377, level: 'critical' });
    assert.equal(report.body.disabled, true);
    assert.equal(report.body.disabledReason, 'EMAIL_REPUTATION');
    assert.equal(report.body.recentSuspensions.length, 1);
    const [suspension] = report.body.recentSuspensions;
    assert.equal(suspension.reason, 'EMAIL_REPUTATION');
    assert.deepEqual(suspension.bounceRate, { last7Days: 8.377, allTime: 8.377 });
    assert.equal(suspension.sentAllTime, 191);
    assert.ok(!Number.isNaN(Date.parse(suspension.createdAt)));
    const other = await server.api.get(`/projects/${p.project.id}/security`, { cookie: p.cookie });
    assert.equal(other.status, 200);
    assert.deepEqual({ ...other.body, recentSuspensions: null }, { ...report.body, recentSuspensions: null });

    const listed = await server.api.get('/users/@me/projects', { cookie: p.cookie });
    const mine = listed.body.find((x: { id: string }) => x.id === p.project.id);
    assert.equal(mine.disabled, true);
    assert.equal(mine.disabledReason, 'EMAIL_REPUTATION');

    // API keys see it at once (the key cache was warm from the sends above).
    const send = await p.sk.post('/v1/send', { to: 'x@example.org', from: p.from, subject: 's', body: 'b' });
    assert.equal(send.status, 403);
    assert.equal(send.body.error.code, 'PROJECT_DISABLED');
    assert.equal(send.body.error.details.reason, 'EMAIL_REPUTATION');

    // Its queued emails were stopped with a clear error.
    const queued = await server.sql<{ status: string; error: string }>(
      `SELECT status, error FROM emails WHERE project_id = $1 AND to_email LIKE 'fixture-%' AND sent_at IS NULL`,
      [p.project.id],
    );
    assert.equal(queued.length, 3);
    for (const q of queued) assert.deepEqual(q, { status: 'FAILED', error: STOPPED });

    // A delivery job that still runs for the project sends nothing.
    const late = randomUUID();
    await server.sql(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $2, 'b') RETURNING id)
       INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status)
       VALUES ($1, $2, 'late@example.org', $3, 'TRANSACTIONAL', 's', (SELECT id FROM c), 'QUEUED')`,
      [late, p.project.id, p.from],
    );
    await server.ctx.jobs.send('email-delivery', { emailIds: [late] });
    const [stopped] = await (async () => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const rows = await server.sql<{ status: string; error: string }>('SELECT status, error FROM emails WHERE id = $1', [late]);
        if (rows[0].status !== 'QUEUED' && rows[0].status !== 'SENDING') return rows;
        if (Date.now() > deadline) assert.fail('the late email was never picked up');
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    assert.deepEqual(stopped, { status: 'FAILED', error: STOPPED });
    assert.equal(
      sink.messages.some((m) => m.envelope.to.includes('late@example.org')),
      false,
    );
  });

  test('complaints: 2 in 1001 sent (0.2 %) crosses the 7-day critical 0.15 %', async () => {
    const p = await project('complained');
    await fixtures(p.project.id, 999, 'DELIVERED');
    await fixtures(p.project.id, 1, 'COMPLAINED');
    const real = await sentEmail(p, 'will-complain@example.org');

    const warn = await security(p);
    assert.deepEqual(warn.body.complaintRate, { last7Days: 0.0999, allTime: 0.0999, level: 'warning' });
    assert.equal(warn.body.status, 'warning');

    await sesNotification('Complaint', real.messageId, 'will-complain@example.org', p.from);
    const report = await security(p);
    assert.deepEqual(report.body.complaintRate, { last7Days: 0.1998, allTime: 0.1998, level: 'critical' });
    assert.equal(report.body.bounceRate.level, 'ok');
    assert.equal(report.body.disabled, true);
    assert.equal(report.body.disabledReason, 'EMAIL_REPUTATION');
  });

  test('below 100 sent emails no rate is alarming; the periodic pass catches a rate that became critical with volume', async () => {
    const p = await project('small');
    await fixtures(p.project.id, 75, 'DELIVERED');
    await fixtures(p.project.id, 20, 'BOUNCED');
    // A relay hard bounce (SMTP 550) is judged the same way: 21 of 96 bounced, but too few to count.
    sink.failNext({ stage: 'rcpt', code: 550, message: '5.1.1 unknown user' });
    const res = await p.sk.post('/v1/send', { to: 'unknown@example.org', from: p.from, subject: 's', body: 'b' });
    await waitForStatus(p.sk, res.body.data.emails[0].email, ['BOUNCED']);
    const small = await security(p);
    assert.equal(small.body.sentAllTime, 96);
    assert.deepEqual(small.body.bounceRate, { last7Days: 21.875, allTime: 21.875, level: 'ok' });
    assert.equal(small.body.status, 'ok');
    assert.equal(small.body.disabled, false);

    // Ten more delivered emails: 21 of 106 is critical, though no new bounce triggered a check.
    await fixtures(p.project.id, 10, 'DELIVERED');
    assert.equal((await security(p)).body.disabled, false);
    await evaluateActiveProjects(server.ctx);
    const after = await security(p);
    assert.equal(after.body.disabled, true);
    assert.equal(after.body.recentSuspensions.length, 1);
    assert.deepEqual(after.body.recentSuspensions[0].bounceRate, { last7Days: 19.8113, allTime: 19.8113 });
  });

  test('the 7-day and all-time windows are judged separately', async () => {
    const p = await project('history');
    await fixtures(p.project.id, 270, 'DELIVERED', 30);
    await fixtures(p.project.id, 30, 'BOUNCED', 30);
    await fixtures(p.project.id, 100, 'DELIVERED', 1);
    const report = await security(p);
    assert.deepEqual(report.body.bounceRate, { last7Days: 0, allTime: 7.5, level: 'warning' });
    assert.equal(report.body.sentLast7Days, 100);
    assert.equal(report.body.sentAllTime, 400);
    assert.equal(report.body.status, 'warning');
    assert.deepEqual(report.body.thresholds.bounce, { last7Days: { warning: 5, critical: 10 }, allTime: { warning: 4, critical: 8 } });
    assert.equal(report.body.minimumVolume, 100);
    await evaluateActiveProjects(server.ctx);
    assert.equal((await security(p)).body.disabled, false, 'a warning does not disable');
  });

  test('a fresh project is ok with zero rates', async () => {
    const p = await project('fresh');
    const report = await security(p);
    assert.deepEqual(
      { ...report.body, thresholds: undefined, minimumVolume: undefined },
      {
        bounceRate: { last7Days: 0, allTime: 0, level: 'ok' },
        complaintRate: { last7Days: 0, allTime: 0, level: 'ok' },
        sentLast7Days: 0,
        sentAllTime: 0,
        status: 'ok',
        disabled: false,
        disabledReason: null,
        recentSuspensions: [],
        thresholds: undefined,
        minimumVolume: undefined,
      },
    );
  });

  test('the security endpoints need a session of a member', async () => {
    const p = await project('private');
    const stranger = await bootstrap(server.api, 'stranger');
    for (const url of [`/users/@me/projects/${p.project.id}/security`, `/projects/${p.project.id}/security`]) {
      const anonymous = await server.api.get(url);
      assert.equal(anonymous.status, 401);
      assert.equal(anonymous.body.error.code, 'UNAUTHORIZED');
      const byKey = await p.sk.get(url);
      assert.equal(byKey.status, 401, 'a cookie route');
      const foreign = await server.api.get(url, { cookie: stranger.cookie });
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.error.code, 'PROJECT_NOT_FOUND');
    }
  });
});
