import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { buildWorkflow, testClock, waitFor } from './helpers/workflows.ts';
import { whileAnotherTransaction } from './helpers/other-transaction.ts';
import { updateContactsData } from '../src/modules/contacts/service.ts';

/**
 * The workflow engine through HTTP: real PostgreSQL, the runner loop of the test server's worker,
 * a real SMTP sink, and a clock the tests move to make timers fall due.
 */

const DOMAIN = 'flow.example.test';
const FROM = `hello@${DOMAIN}`;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let p: Bootstrapped;
const clock = testClock();

before(async () => {
  dns = await startTestDns();
  sink = await startSmtpSink();
  server = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '1000' }, { clock });
  p = await bootstrap(server.api, 'Flows');
  await verifyDomain(p.sk, dns, DOMAIN);
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

async function template(name: string, subject: string, body = '<p>{{email}}</p>', type = 'MARKETING'): Promise<string> {
  const res = await p.sk.post('/templates', { name, subject, body, from: FROM, type });
  assert.equal(res.status, 201, res.text);
  return res.body.id;
}

const received = (to: string) => sink.messages.filter((m) => m.envelope.to.includes(to));
const subjects = (to: string) =>
  received(to)
    .map((m) => m.parsed.subject ?? '')
    .sort();

async function track(email: string, event: string, data?: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const res = await p.pk.post('/v1/track', { email, event, ...(data ? { data } : {}), ...extra });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

type Exec = { id: string; status: string; contact_id: string; exit_reason: string | null; error: string | null; due_at: Date | null };

const executions = (workflowId: string) =>
  server.sql<Exec & { email: string }>(
    'SELECT x.id, x.status, x.contact_id, x.exit_reason, x.error, x.due_at, c.email FROM workflow_executions x JOIN contacts c ON c.id = x.contact_id WHERE x.workflow_id = $1 ORDER BY c.email, x.started_at',
    [workflowId],
  );

const execOf = async (workflowId: string, email: string) => (await executions(workflowId)).filter((e) => e.email === email);

const stepRows = (executionId: string) =>
  server.sql<{ step_id: string; status: string; output: Record<string, unknown> | null; error: string | null; attempt: number }>(
    'SELECT step_id, status, output, error, attempt FROM workflow_step_executions WHERE execution_id = $1 ORDER BY started_at, id',
    [executionId],
  );

async function statusIs(workflowId: string, email: string, statuses: string[], timeoutMs = 45_000): Promise<Exec> {
  return waitFor(
    `${email} in ${statuses.join('/')}`,
    async () => {
      const [e] = await execOf(workflowId, email);
      return e && statuses.includes(e.status) ? e : null;
    },
    timeoutMs,
  );
}

describe('workflow engine', () => {
  test('a welcome series: event → SEND_EMAIL → DELAY → CONDITION → two different emails', async () => {
    const welcome = await template('Welcome', 'Welcome via {{event.source ?? "nowhere"}}');
    const pro = await template('Pro tips', 'Tips for pro users');
    const upgrade = await template('Upgrade', 'Time to upgrade, {{email}}');
    const wf = await buildWorkflow(p.sk, {
      eventName: 'signup',
      steps: [
        { key: 'welcome', type: 'SEND_EMAIL', config: { templateId: welcome } },
        { key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'days' } },
        { key: 'isPro', type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } },
        { key: 'pro', type: 'SEND_EMAIL', config: { templateId: pro } },
        { key: 'upgrade', type: 'SEND_EMAIL', config: { templateId: upgrade } },
      ],
      edges: [
        ['trigger', 'welcome'],
        ['welcome', 'wait'],
        ['wait', 'isPro'],
        ['isPro', 'pro', 'yes'],
        ['isPro', 'upgrade', 'no'],
      ],
    });
    await track('ann@people.test', 'signup', { plan: 'pro', source: 'ads' });
    await track('bob@people.test', 'signup', { plan: 'free', source: 'blog' });
    // MARKETING mail skips an unsubscribed contact and records why; the walk goes on.
    await track('cyd@people.test', 'signup', { plan: 'free' }, { subscribed: false });

    await waitFor('two welcome emails', async () => received('ann@people.test').length === 1 && received('bob@people.test').length === 1);
    assert.deepEqual(subjects('ann@people.test'), ['Welcome via ads']);
    assert.deepEqual(subjects('bob@people.test'), ['Welcome via blog']);
    const ann = await statusIs(wf.id, 'ann@people.test', ['WAITING']);
    assert.match(ann.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'execution ids are UUID v7');
    assert.ok(ann.due_at && Math.abs(ann.due_at.getTime() - (clock.now().getTime() + DAY)) < 60_000, 'the DELAY is a due_at one day out');
    const cyd = await statusIs(wf.id, 'cyd@people.test', ['WAITING']);
    const cydSteps = await stepRows(cyd.id);
    const skipped = cydSteps.find((s) => s.step_id === wf.steps.welcome)!;
    assert.equal(skipped.status, 'SKIPPED');
    assert.equal(skipped.output?.reason, 'unsubscribed');
    const [cydEmail] = await server.sql<{ status: string; workflow_id: string }>('SELECT status, workflow_id FROM emails WHERE id = $1', [
      skipped.output?.emailId,
    ]);
    assert.deepEqual(cydEmail, { status: 'SKIPPED', workflow_id: wf.id });
    // The step's counts add up: the one not sent is counted as skipped.
    const detail = await p.sk.get(`/workflows/${wf.id}`);
    const welcomeStep = detail.body.steps.find((s: { id: string }) => s.id === wf.steps.welcome);
    assert.deepEqual(welcomeStep.counts, { entered: 3, completed: 2, waiting: 0, failed: 0, skipped: 1 });

    clock.advance(DAY + 1000);
    await statusIs(wf.id, 'ann@people.test', ['COMPLETED']);
    await statusIs(wf.id, 'bob@people.test', ['COMPLETED']);
    await statusIs(wf.id, 'cyd@people.test', ['COMPLETED']);
    await waitFor('the follow-ups', async () => received('ann@people.test').length === 2 && received('bob@people.test').length === 2);
    assert.deepEqual(subjects('ann@people.test'), ['Tips for pro users', 'Welcome via ads']);
    assert.deepEqual(subjects('bob@people.test'), ['Time to upgrade, bob@people.test', 'Welcome via blog']);
    assert.equal(received('cyd@people.test').length, 0);

    const annRows = await stepRows(ann.id);
    assert.deepEqual(
      annRows.map((r) => [r.step_id, r.status]),
      [
        [wf.steps.trigger, 'COMPLETED'],
        [wf.steps.welcome, 'COMPLETED'],
        [wf.steps.wait, 'COMPLETED'],
        [wf.steps.isPro, 'COMPLETED'],
        [wf.steps.pro, 'COMPLETED'],
      ],
    );
    assert.equal(annRows[3].output?.branch, 'yes');
    const emails = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM emails WHERE workflow_id = $1', [wf.id]);
    assert.equal(emails[0].n, 6, 'three welcome emails (one skipped) and three follow-ups (one skipped)');
  });

  test('timers follow the injectable clock: nothing early, fired within a second of the due time', async () => {
    const wf = await buildWorkflow(p.sk, {
      eventName: 'timer_check',
      steps: [
        { key: 'wait', type: 'DELAY', config: { amount: 2, unit: 'hours' } },
        { key: 'done', type: 'UPDATE_CONTACT', config: { data: { timerFired: true } } },
      ],
      edges: [
        ['trigger', 'wait'],
        ['wait', 'done'],
      ],
    });
    await track('tim@people.test', 'timer_check');
    const waiting = await statusIs(wf.id, 'tim@people.test', ['WAITING']);
    clock.advance(2 * HOUR - MINUTE);
    await new Promise((r) => setTimeout(r, 800));
    assert.equal((await execOf(wf.id, 'tim@people.test'))[0].status, 'WAITING', 'a minute early: still waiting');
    clock.advance(MINUTE);
    const dueFrom = clock.now().getTime();
    await statusIs(wf.id, 'tim@people.test', ['COMPLETED']);
    // When the runner took the timer: the DELAY row completes with its batch's clock time.
    const [delay] = await server.sql<{ completed_at: Date }>('SELECT completed_at FROM workflow_step_executions WHERE execution_id = $1 AND step_id = $2', [
      waiting.id,
      wf.steps.wait,
    ]);
    const late = delay.completed_at.getTime() - dueFrom;
    assert.ok(late >= 0 && late < 1000, `fired ${late} ms after falling due`);
    const [contact] = await server.sql<{ data: Record<string, unknown> }>('SELECT data FROM contacts WHERE id = $1', [waiting.contact_id]);
    assert.equal(contact.data.timerFired, true);
  });

  test('WAIT_FOR_EVENT resumes on the event (with its data) or takes the timeout branch', async () => {
    const activated = await template('Activated', 'Enjoy {{event.feature}}');
    const nudge = await template('Nudge', 'Still there?');
    const wf = await buildWorkflow(p.sk, {
      eventName: 'trial_started',
      steps: [
        { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 3600 } },
        { key: 'yay', type: 'SEND_EMAIL', config: { templateId: activated } },
        { key: 'nudge', type: 'SEND_EMAIL', config: { templateId: nudge } },
      ],
      edges: [
        ['trigger', 'wait'],
        ['wait', 'yay', 'event'],
        ['wait', 'nudge', 'timeout'],
      ],
    });
    await track('eve@people.test', 'trial_started', { plan: 'trial' });
    await track('ted@people.test', 'trial_started');
    await statusIs(wf.id, 'eve@people.test', ['WAITING']);
    const ted = await statusIs(wf.id, 'ted@people.test', ['WAITING']);

    await track('eve@people.test', 'activated', { feature: 'reports' });
    const eve = await statusIs(wf.id, 'eve@people.test', ['COMPLETED']);
    await waitFor('the activation email', async () => received('eve@people.test').length === 1);
    assert.deepEqual(subjects('eve@people.test'), ['Enjoy reports']);
    const eveRows = await stepRows(eve.id);
    assert.equal(eveRows.find((r) => r.step_id === wf.steps.wait)?.output?.branch, 'event');
    const [ctx] = await server.sql<{ context: Record<string, unknown> }>('SELECT context FROM workflow_executions WHERE id = $1', [eve.id]);
    assert.deepEqual(ctx.context, { plan: 'trial', feature: 'reports' }, 'the awaited event’s data is added to the context');

    clock.advance(3600 * 1000 + 500);
    await statusIs(wf.id, 'ted@people.test', ['COMPLETED']);
    await waitFor('the nudge', async () => received('ted@people.test').length === 1);
    assert.deepEqual(subjects('ted@people.test'), ['Still there?']);
    assert.equal((await stepRows(ted.id)).find((r) => r.step_id === wf.steps.wait)?.output?.branch, 'timeout');
    // An event after the timeout resumes nothing.
    await track('ted@people.test', 'activated', { feature: 'late' });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(received('ted@people.test').length, 1);
  });

  test('re-entry: once ever without allowReentry, again after finishing with it, never two active at once', async () => {
    const once = await buildWorkflow(p.sk, {
      eventName: 'visit',
      steps: [{ key: 'mark', type: 'UPDATE_CONTACT', config: { data: { visited: true } } }],
      edges: [['trigger', 'mark']],
    });
    const again = await buildWorkflow(p.sk, {
      eventName: 'visit',
      allowReentry: true,
      steps: [{ key: 'wait', type: 'DELAY', config: { amount: 10, unit: 'minutes' } }],
      edges: [['trigger', 'wait']],
    });
    await track('rex@people.test', 'visit');
    await statusIs(once.id, 'rex@people.test', ['COMPLETED']);
    await statusIs(again.id, 'rex@people.test', ['WAITING']);
    await track('rex@people.test', 'visit'); // while `again` is active: no second entry
    await new Promise((r) => setTimeout(r, 400));
    assert.equal((await execOf(once.id, 'rex@people.test')).length, 1);
    assert.equal((await execOf(again.id, 'rex@people.test')).length, 1);
    clock.advance(10 * MINUTE + 1000);
    await statusIs(again.id, 'rex@people.test', ['COMPLETED']);
    await track('rex@people.test', 'visit');
    await waitFor('a second entry', async () => (await execOf(again.id, 'rex@people.test')).length === 2);
    assert.equal((await execOf(once.id, 'rex@people.test')).length, 1, 'no re-entry without allowReentry');
    // The API start follows the same rules.
    const [{ contact_id }] = await execOf(once.id, 'rex@people.test');
    const refused = await p.sk.post(`/workflows/${once.id}/executions`, { contactId: contact_id });
    assert.equal(refused.status, 409, refused.text);
    const busy = await p.sk.post(`/workflows/${again.id}/executions`, { contactId: contact_id });
    assert.equal(busy.status, 409, busy.text);
  });

  test('UPDATE_CONTACT of a contact that already holds the values leaves its row as it was; of one that does not, writes it', async () => {
    const wf = await buildWorkflow(p.sk, {
      eventName: 'badge',
      steps: [{ key: 'mark', type: 'UPDATE_CONTACT', config: { data: { badge: 'gold' } } }],
      edges: [['trigger', 'mark']],
    });
    const row = async (email: string) =>
      (await server.sql<{ xmin: string; data: Record<string, unknown> }>(`SELECT xmin::text, data FROM contacts WHERE email = $1`, [email]))[0];
    await p.sk.post('/contacts', { email: 'gilded@people.test', data: { badge: 'gold', rank: 1 } });
    await p.sk.post('/contacts', { email: 'plain@people.test', data: { rank: 2 } });
    const gilded = await row('gilded@people.test');
    const plain = await row('plain@people.test');
    await track('gilded@people.test', 'badge');
    await track('plain@people.test', 'badge');
    await statusIs(wf.id, 'gilded@people.test', ['COMPLETED']);
    await statusIs(wf.id, 'plain@people.test', ['COMPLETED']);
    assert.deepEqual(await row('gilded@people.test'), gilded);
    const changed = await row('plain@people.test');
    assert.notEqual(changed.xmin, plain.xmin);
    assert.deepEqual(changed.data, { rank: 2, badge: 'gold' });
  });

  test("UPDATE_CONTACT's batch locks its contacts in email order, the order every multi-contact upsert takes", async () => {
    // zed is created first, so its id sorts before amy's: an update locking by id would take zed first.
    const zed = (await p.sk.post('/contacts', { email: 'zed@lock-order.test' })).body.id as string;
    const amy = (await p.sk.post('/contacts', { email: 'amy@lock-order.test' })).body.id as string;
    assert.ok(zed < amy);
    let amyLockedByUpdate = false;
    // The step's statement waits for zed's row lock. In email order it already holds amy's, so a
    // third transaction cannot lock amy; in id order it could.
    const updated = await whileAnotherTransaction(server, {
      hold: (other) => other.query(`SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE`, [zed]),
      request: () => updateContactsData(server.ctx.database.db, p.project.id, [zed, amy], { badge: 'ordered' }, { now: new Date() }),
      beforeCommit: async () => {
        const third = await server.ctx.database.pool.connect();
        try {
          await third.query(`SET lock_timeout = '1s'`);
          await third.query(`SELECT 1 FROM contacts WHERE id = $1 FOR NO KEY UPDATE`, [amy]);
        } catch (err) {
          amyLockedByUpdate = (err as { code?: string }).code === '55P03'; // lock_not_available
        } finally {
          third.release();
        }
      },
    });
    assert.equal(amyLockedByUpdate, true);
    assert.deepEqual([...updated.values()].map((c) => [c.email, c.data.badge]).sort(), [
      ['amy@lock-order.test', 'ordered'],
      ['zed@lock-order.test', 'ordered'],
    ]);
  });

  test('a segment entry starts a workflow; UPDATE_CONTACT and CONDITION on event.* context', async () => {
    const seg = await p.sk.post('/segments', {
      name: 'VIP club',
      trackMembership: true,
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.tier', operator: 'equals', value: 'vip' }] }] },
    });
    assert.equal(seg.status, 201, seg.text);
    const hello = await template('VIP', 'Welcome to the {{event.segmentName}}');
    const wf = await buildWorkflow(p.sk, {
      eventName: 'segment.vip-club.entry',
      steps: [
        { key: 'check', type: 'CONDITION', config: { field: 'event.segmentName', operator: 'equals', value: 'VIP club' } },
        { key: 'mail', type: 'SEND_EMAIL', config: { templateId: hello } },
      ],
      edges: [
        ['trigger', 'check'],
        ['check', 'mail', 'yes'],
      ],
    });
    const created = await p.sk.post('/contacts', { email: 'val@people.test', data: { tier: 'basic' } });
    assert.ok(created.status === 201 || created.status === 200, created.text);
    const patched = await p.sk.patch(`/contacts/${created.body.id}`, { data: { tier: 'vip' } });
    assert.equal(patched.status, 200, patched.text);
    await statusIs(wf.id, 'val@people.test', ['COMPLETED'], 20_000);
    await waitFor('the VIP email', async () => received('val@people.test').length === 1);
    assert.deepEqual(subjects('val@people.test'), ['Welcome to the VIP club']);
  });

  test('subscription events trigger workflows; the depth guard stops two workflows re-triggering each other', async () => {
    const a = await buildWorkflow(p.sk, {
      eventName: 'contact.unsubscribed',
      allowReentry: true,
      steps: [{ key: 'sub', type: 'UPDATE_CONTACT', config: { subscribed: true } }],
      edges: [['trigger', 'sub']],
    });
    const b = await buildWorkflow(p.sk, {
      eventName: 'contact.subscribed',
      allowReentry: true,
      steps: [{ key: 'unsub', type: 'UPDATE_CONTACT', config: { subscribed: false } }],
      edges: [['trigger', 'unsub']],
    });
    const c = await p.sk.post('/contacts', { email: 'loop@people.test' });
    const off = await p.sk.patch(`/contacts/${c.body.id}`, { subscribed: false });
    assert.equal(off.status, 200, off.text);
    await waitFor('the loop to stop', async () => {
      const rows = await server.sql<{ n: number; active: number }>(
        "SELECT count(*)::int AS n, count(*) FILTER (WHERE status IN ('RUNNING','WAITING'))::int AS active FROM workflow_executions WHERE workflow_id = ANY($1::uuid[])",
        [[a.id, b.id]],
      );
      return rows[0].n > 0 && rows[0].active === 0 ? rows : null;
    });
    await new Promise((r) => setTimeout(r, 600));
    const [{ n, max }] = await server.sql<{ n: number; max: number }>(
      'SELECT count(*)::int AS n, max(depth)::int AS max FROM workflow_executions WHERE workflow_id = ANY($1::uuid[])',
      [[a.id, b.id]],
    );
    assert.equal(max, 5, 'entries stop at depth 5');
    assert.equal(n, 6, 'one entry per depth 0..5');
  });

  test('cancel one and cancel-all: the executions end CANCELLED and their timers never fire', async () => {
    const wf = await buildWorkflow(p.sk, {
      eventName: 'cancel_me',
      steps: [
        { key: 'wait', type: 'DELAY', config: { amount: 5, unit: 'minutes' } },
        { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { cancelledRan: true } } },
      ],
      edges: [
        ['trigger', 'wait'],
        ['wait', 'mark'],
      ],
    });
    for (const who of ['c1', 'c2', 'c3']) await track(`${who}@cancel.test`, 'cancel_me');
    const first = await statusIs(wf.id, 'c1@cancel.test', ['WAITING']);
    await statusIs(wf.id, 'c2@cancel.test', ['WAITING']);
    await statusIs(wf.id, 'c3@cancel.test', ['WAITING']);
    const one = await p.sk.delete(`/workflows/${wf.id}/executions/${first.id}`);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.status, 'CANCELLED');
    const all = await p.sk.post(`/workflows/${wf.id}/executions/cancel-all`, {});
    assert.equal(all.status, 200, all.text);
    assert.equal(all.body.cancelled, 2);
    clock.advance(5 * MINUTE + 1000);
    await new Promise((r) => setTimeout(r, 800));
    assert.deepEqual(
      (await executions(wf.id)).map((e) => e.status),
      ['CANCELLED', 'CANCELLED', 'CANCELLED'],
    );
    const ran = await server.sql<{ n: number }>("SELECT count(*)::int AS n FROM contacts WHERE email LIKE '%@cancel.test' AND data ? 'cancelledRan'");
    assert.equal(ran[0].n, 0);
    const waits = await stepRows(first.id);
    assert.deepEqual(
      waits.map((r) => r.status),
      ['COMPLETED', 'SKIPPED'],
    );
  });

  test('a disabled workflow takes no new entries; EXIT ends EXITED with its reason; CUSTOM recipient', async () => {
    const notify = await template('Team', 'New lead {{contact.email}}', '<p>{{contact.email}}</p>');
    const wf = await buildWorkflow(p.sk, {
      eventName: 'lead',
      steps: [
        { key: 'team', type: 'SEND_EMAIL', config: { templateId: notify, recipient: { type: 'CUSTOM', email: 'sales@team.test' } } },
        { key: 'bye', type: 'EXIT', config: { reason: 'handed to sales' } },
      ],
      edges: [
        ['trigger', 'team'],
        ['team', 'bye'],
      ],
    });
    await track('lia@people.test', 'lead');
    const e = await statusIs(wf.id, 'lia@people.test', ['EXITED']);
    assert.equal(e.exit_reason, 'handed to sales');
    await waitFor('the team notification', async () => received('sales@team.test').length === 1).catch(async (err) => {
      console.log(await server.sql('SELECT status, error, to_email, contact_id FROM emails WHERE workflow_id = $1', [wf.id]));
      throw err;
    });
    assert.deepEqual(subjects('sales@team.test'), ['New lead lia@people.test']);
    assert.equal(received('lia@people.test').length, 0);
    assert.equal((await p.sk.patch(`/workflows/${wf.id}`, { enabled: false })).status, 200);
    await track('max@people.test', 'lead');
    await new Promise((r) => setTimeout(r, 400));
    assert.equal((await execOf(wf.id, 'max@people.test')).length, 0);
  });

  test('delivered mail drives workflows: email.sent enrols each contact once, two emails to one contact included, and resumes a wait for it', async () => {
    const onSent = await buildWorkflow(p.sk, {
      eventName: 'email.sent',
      steps: [{ key: 'hold', type: 'WAIT_FOR_EVENT', config: { eventName: 'never_happens', timeout: 3600 } }],
      edges: [['trigger', 'hold']],
    });
    const waits = await buildWorkflow(p.sk, {
      eventName: 'trial_begins',
      steps: [
        { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'email.sent', timeout: 3600 } },
        { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { gotMail: true } } },
      ],
      edges: [
        ['trigger', 'wait'],
        ['wait', 'mark', 'event'],
      ],
    });
    await track('dee@mailflow.test', 'trial_begins');
    await statusIs(waits.id, 'dee@mailflow.test', ['WAITING']);

    // Two sends at once: ann gets two emails, which may be recorded in one statement.
    const sends = await Promise.all([
      p.sk.post('/v1/send', { to: ['ann@mailflow.test', 'bob@mailflow.test', 'dee@mailflow.test'], from: FROM, subject: 'One', body: '<p>1</p>' }),
      p.sk.post('/v1/send', { to: 'ann@mailflow.test', from: FROM, subject: 'Two', body: '<p>2</p>' }),
    ]);
    for (const res of sends) assert.equal(res.status, 200, res.text);
    await waitFor('all four messages', async () => ['ann', 'bob', 'dee'].reduce((n, who) => n + received(`${who}@mailflow.test`).length, 0) === 4);
    await waitFor('every email recorded as sent', async () => {
      const [row] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM emails WHERE to_email LIKE '%@mailflow.test' AND status = 'SENT'`);
      return row.n === 4;
    });

    for (const who of ['ann', 'bob', 'dee']) await statusIs(onSent.id, `${who}@mailflow.test`, ['WAITING']);
    assert.deepEqual(
      (await executions(onSent.id)).filter((e) => e.email.endsWith('@mailflow.test')).map((e) => e.email),
      ['ann@mailflow.test', 'bob@mailflow.test', 'dee@mailflow.test'],
      'one execution per contact, however many emails it was sent',
    );
    const [{ count }] = await server.sql<{ count: number }>(
      `SELECT count(*)::int AS count FROM events e JOIN contacts c ON c.id = e.contact_id WHERE c.email = 'ann@mailflow.test' AND e.name = 'email.sent'`,
    );
    assert.equal(count, 2, 'both of ann’s emails were recorded as events');

    const dee = await statusIs(waits.id, 'dee@mailflow.test', ['COMPLETED']);
    assert.equal((await stepRows(dee.id)).find((r) => r.step_id === waits.steps.wait)?.output?.branch, 'event');
    const [contact] = await server.sql<{ data: Record<string, unknown> }>('SELECT data FROM contacts WHERE id = $1', [dee.contact_id]);
    assert.equal(contact.data.gotMail, true);

    for (const wf of [onSent, waits]) assert.equal((await p.sk.patch(`/workflows/${wf.id}`, { enabled: false })).status, 200);
  });
});
