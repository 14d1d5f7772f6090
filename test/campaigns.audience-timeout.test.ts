import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { restartStalledCampaigns } from '../src/modules/campaigns/recovery.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { holdLock as holdLockOn, lockContactFields as lockContactFieldsOf } from './helpers/locks.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * The campaign worker's audience statements (a scheduled campaign's count at its start, each
 * fan-out batch) run under the condition bound (10 s) and never with the campaign row locked; an
 * audience past the bound stops the campaign instead of being retried; the watchdog skips a
 * campaign whose row is locked.
 *
 * "Past the bound" is made deterministic by locking `contact_fields` (which every FILTERED audience
 * statement reads first, and delivery never reads): statement_timeout counts the wait like any
 * other time. Before the change the scheduled start and the batch waited as long as the lock was
 * held, with the campaign row locked, and the watchdog waited behind that row.
 */

const DOMAIN = 'bound.example.test';
const FROM = `news@${DOMAIN}`;
const EVERYONE = { logic: 'AND', groups: [{ filters: [{ field: 'data.d', operator: 'olderThan', value: 1, unit: 'minutes' }] }] };
const REASON = "Evaluating the condition over this project's contacts took longer than 10 s: use fewer or simpler filters";

let env: MailEnv;

before(async () => {
  // 10 sends a second: a fan-out window of 50 emails, the next batch once 25 or fewer wait.
  // A temporary failure is retried 5 minutes later, so the emails it hits stay QUEUED through the test.
  env = await startMailEnv({ SEND_RATE_PER_SECOND: '10', DELIVERY_RETRY_BASE_SECONDS: '300' });
});
after(async () => env?.stop());

async function tenantWithContacts(label: string, count: number): Promise<Bootstrapped> {
  const b = await bootstrap(env.server.api, label);
  await verifyDomain(b.sk, env.dns, DOMAIN);
  for (let i = 0; i < count; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, count - i) }, async (_, k) => {
        const res = await b.sk.post('/contacts', { email: `${label}${i + k}@rcpt.test`, data: { d: '2024-05-01T10:00:00Z' } });
        assert.equal(res.status, 201, res.text);
      }),
    );
  }
  return b;
}

async function filteredCampaign(b: Bootstrapped): Promise<string> {
  const res = await b.sk.post('/campaigns', {
    name: 'Bound',
    subject: 'Hi',
    body: '<p>hi</p>',
    from: FROM,
    audienceType: 'FILTERED',
    audienceCondition: EVERYONE,
  });
  assert.equal(res.status, 201, res.text);
  return res.body.data.id;
}

const holdLock = (lock: string, values: unknown[] = []) => holdLockOn(env.server.databaseUrl, lock, values);
const lockContactFields = () => lockContactFieldsOf(env.server.databaseUrl);

/** Some statement waits for the lock on contact_fields: an audience statement is under way. */
const audienceWaiting = async () =>
  (await env.server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'contact_fields'::regclass AND NOT granted`))[0].n > 0;

/** Whether the campaign row can be locked at once (NOWAIT) from another connection. */
async function rowIsFree(campaignId: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: env.server.databaseUrl });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT 1 FROM campaigns WHERE id = $1 FOR UPDATE NOWAIT', [campaignId]);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return false;
    throw err;
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end();
  }
}

type CampaignState = { status: string; scheduled_for: Date | null; send_job_id: string | null; total_recipients: number };
const campaignState = async (id: string) =>
  (await env.server.sql<CampaignState>(`SELECT status, scheduled_for, send_job_id, total_recipients FROM campaigns WHERE id = $1`, [id]))[0];

const emailsByStatus = async (campaignId: string) =>
  Object.fromEntries(
    (
      await env.server.sql<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM emails WHERE campaign_id = $1 GROUP BY status`, [campaignId])
    ).map((r) => [r.status, r.n]),
  );

describe('campaign audience statements in the worker', () => {
  test('a scheduled campaign whose audience count passes the bound goes back to DRAFT, counted without its row locked', { timeout: 90_000 }, async () => {
    const b = await tenantWithContacts('sched', 5);
    const id = await filteredCampaign(b);
    const scheduled = await b.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(Date.now() + 2_000).toISOString() });
    assert.equal(scheduled.status, 200, scheduled.text);
    assert.equal(scheduled.body.data.status, 'SCHEDULED');

    const lock = await lockContactFields();
    try {
      await waitFor('the start count to wait for contact_fields', audienceWaiting, 30_000);
      const waitingSince = Date.now();
      assert.equal((await campaignState(id)).status, 'SCHEDULED');
      assert.equal(await rowIsFree(id), true, 'the campaign row is not locked while its audience is counted');
      const state = await waitFor(
        'the campaign to leave SCHEDULED',
        async () => ((s) => (s.status !== 'SCHEDULED' ? s : null))(await campaignState(id)),
        20_000,
        100,
      );
      const took = Date.now() - waitingSince;
      assert.deepEqual(
        { status: state.status, scheduledFor: state.scheduled_for, sendJobId: state.send_job_id },
        { status: 'DRAFT', scheduledFor: null, sendJobId: null },
      );
      assert.ok(took >= 5_000 && took < 15_000, `stopped ${took} ms after the count began to wait (the bound is 10 s)`);
    } finally {
      await lock.release();
    }
    const read = await b.sk.get(`/campaigns/${id}`);
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.status, 'DRAFT');
    assert.equal(read.body.scheduledFor, null);
    assert.equal(read.body.sentAt, null);
    assert.deepEqual(await emailsByStatus(id), {});
    // Not retried: still DRAFT with no email a while later.
    await new Promise((r) => setTimeout(r, 2_500));
    assert.equal((await campaignState(id)).status, 'DRAFT');
    assert.deepEqual(await emailsByStatus(id), {});
  });

  test('a sending campaign whose fan-out batch passes the bound ends CANCELLED, its queued emails SKIPPED with the reason', { timeout: 180_000 }, async () => {
    const b = await tenantWithContacts('fan', 80);
    const id = await filteredCampaign(b);
    // The first five deliveries fail temporarily: those emails wait (QUEUED) for a retry in 5 minutes.
    env.sink.failNext({ stage: 'rcpt', code: 451, message: '451 try again later', times: 5 });
    const sent = await b.sk.post(`/campaigns/${id}/send`, {});
    assert.equal(sent.status, 200, sent.text);
    assert.equal(sent.body.message, 'Campaign is being sent to 80 recipients');
    // The first batch fills the window (50); the next one is read once 25 or fewer wait.
    await waitFor('the first batch', async () => Object.values(await emailsByStatus(id)).reduce((a, n) => a + n, 0) >= 50, 30_000, 10);
    const lock = await lockContactFields();
    try {
      // Delivery at 10 a second opens the window in about 2.5 s (longer on a busy machine).
      await waitFor('the second batch to wait for contact_fields', audienceWaiting, 60_000);
      const waitingSince = Date.now();
      assert.equal(await rowIsFree(id), true, 'the campaign row is not locked while a batch is read');
      const state = await waitFor('the campaign to stop', async () => ((s) => (s.status !== 'SENDING' ? s : null))(await campaignState(id)), 20_000, 100);
      const took = Date.now() - waitingSince;
      assert.ok(took >= 5_000 && took < 15_000, `stopped ${took} ms after the batch began to wait (the bound is 10 s)`);
      assert.equal(state.status, 'CANCELLED');
      assert.equal(state.send_job_id, null);
      assert.equal(state.total_recipients, 50, 'the emails written');
    } finally {
      await lock.release();
    }
    await waitFor('every delivery to end', async () => !(await emailsByStatus(id)).SENDING, 30_000);
    // The five waiting for their retry were SKIPPED (and any other still QUEUED on a slow machine); the rest went out.
    const byStatus = await emailsByStatus(id);
    const delivered = (byStatus.SENT ?? 0) + (byStatus.DELIVERED ?? 0);
    assert.ok(byStatus.SKIPPED >= 5, JSON.stringify(byStatus));
    assert.equal(byStatus.SKIPPED + delivered, 50, JSON.stringify(byStatus));
    assert.equal(env.sink.messages.filter((m) => m.envelope.to[0].endsWith('@rcpt.test') && m.envelope.to[0].startsWith('fan')).length, delivered);
    const reasons = await env.server.sql<{ error: string }>(`SELECT DISTINCT error FROM emails WHERE campaign_id = $1 AND status = 'SKIPPED'`, [id]);
    assert.deepEqual(reasons, [{ error: `campaign stopped: ${REASON}` }]);

    const read = await b.sk.get(`/campaigns/${id}`);
    assert.equal(read.body.status, 'CANCELLED');
    assert.equal(read.body.totalRecipients, 50);
    const [skipped] = await env.server.sql<{ id: string }>(`SELECT id FROM emails WHERE campaign_id = $1 AND status = 'SKIPPED' LIMIT 1`, [id]);
    const email = await b.sk.get(`/emails/${skipped.id}`);
    assert.equal(email.status, 200, email.text);
    assert.equal(email.body.status, 'SKIPPED');
    assert.equal(email.body.error, `campaign stopped: ${REASON}`);
    // Not retried: no further batch once the lock is gone.
    await new Promise((r) => setTimeout(r, 2_500));
    assert.equal((await campaignState(id)).status, 'CANCELLED');
    assert.equal(
      Object.values(await emailsByStatus(id)).reduce((a, n) => a + n, 0),
      50,
    );
  });

  test('the watchdog skips a stalled campaign whose row is locked instead of waiting for it', { timeout: 30_000 }, async () => {
    const b = await tenantWithContacts('dog', 2);
    const id = await filteredCampaign(b);
    const scheduled = await b.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(Date.now() + 3_600_000).toISOString() });
    assert.equal(scheduled.status, 200, scheduled.text);
    // Its job is lost: a minute overdue, as the watchdog sees it.
    await env.server.sql(`UPDATE campaigns SET scheduled_for = now() - interval '1 minute' WHERE id = $1`, [id]);
    const row = await holdLock('SELECT 1 FROM campaigns WHERE id = $1 FOR UPDATE', [id]);
    try {
      const started = Date.now();
      const sweep = restartStalledCampaigns(env.server.ctx);
      const outcome = await Promise.race([sweep, new Promise<'waited'>((r) => setTimeout(() => r('waited'), 3_000))]);
      assert.equal(outcome, 0, 'the sweep skipped the locked campaign');
      assert.ok(Date.now() - started < 3_000);
    } finally {
      await row.release();
    }
    assert.equal(await restartStalledCampaigns(env.server.ctx), 1, 'once free, it is restarted');
    const cancelled = await b.sk.post(`/campaigns/${id}/cancel`, {});
    assert.equal(cancelled.status, 200, cancelled.text);
  });
});
