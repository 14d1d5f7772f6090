import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { withTransaction } from '../src/db/client.ts';
import { assertWithinBillingLimit } from '../src/modules/billing/limits.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { asMember, signupUser } from './helpers/team.ts';
import { buildWorkflow, waitFor } from './helpers/workflows.ts';

let env: MailEnv;
before(async () => {
  env = await startMailEnv();
});
after(async () => env?.stop());

const limitsPath = (b: Bootstrapped) => `/users/@me/projects/${b.project.id}/billing-limits`;
const owner = (b: Bootstrapped): Api => env.server.api.as({ cookie: b.cookie });

async function project(name: string) {
  const b = await bootstrap(env.server.api, name);
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.example.test`;
  await verifyDomain(b.sk, env.dns, domain);
  return { ...b, from: `hello@${domain}` };
}

const send = (b: Bootstrapped & { from: string }, to: string | string[]) => b.sk.post('/v1/send', { to, from: b.from, subject: 'Hi', body: '<p>Hi</p>' });

describe('billing limits', () => {
  test('GET shows the four categories, unlimited by default; PUT sets and clears caps', async () => {
    const b = await bootstrap(env.server.api, 'Caps');
    const res = await owner(b).get(limitsPath(b));
    assert.equal(res.status, 200, res.text);
    for (const c of ['transactional', 'campaigns', 'workflows', 'inbound']) {
      assert.deepEqual(res.body[c], { limit: null, usage: 0, percentage: null, isWarning: false, isBlocked: false });
    }
    const now = new Date();
    assert.equal(res.body.period.start, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString());

    const put = await owner(b).put(limitsPath(b), { transactional: 100, campaigns: 0 });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.transactional.limit, 100);
    assert.equal(put.body.campaigns.limit, 0);
    assert.equal(put.body.campaigns.isBlocked, true);
    assert.equal(put.body.workflows.limit, null);
    const cleared = await owner(b).put(limitsPath(b), { campaigns: null });
    assert.equal(cleared.body.campaigns.limit, null);
    assert.equal(cleared.body.transactional.limit, 100);
  });

  test('bad limits (-1, 1.5, a string, unknown category, empty) are 422 and change nothing; a MEMBER gets 403', async () => {
    const b = await bootstrap(env.server.api, 'Bad caps');
    await owner(b).put(limitsPath(b), { transactional: 10 });
    for (const [body, field] of [
      [{ transactional: -1 }, 'transactional'],
      [{ campaigns: 1.5 }, 'campaigns'],
      [{ workflows: '100' }, 'workflows'],
      [{ sms: 5 }, ''],
      [{}, ''],
    ] as const) {
      const res = await owner(b).put(limitsPath(b), body);
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.errors[0].field, field);
    }
    const m = await signupUser(env.server.api);
    await joinWithInvitation(env.server, await owner(b).post(`/projects/${b.project.id}/members`, { email: m.email }), m.cookie);
    const member = asMember(env.server.api, m.cookie, b.project.id);
    const refused = await member.put(limitsPath(b), { transactional: 1000 });
    assert.equal(refused.status, 403, refused.text);
    const read = await member.get(limitsPath(b));
    assert.equal(read.status, 200);
    assert.equal(read.body.transactional.limit, 10);
  });

  test('/v1/send: exactly the email past the cap is refused with 403 before anything is written; warnings at 80 % and 100 % once', async () => {
    const b = await project('Tx Cap');
    await owner(b).put(limitsPath(b), { transactional: 5 });
    for (let i = 0; i < 3; i++) assert.equal((await send(b, `r${i}@cap.test`)).status, 200);
    // Two recipients when two remain: fine (5 of 5). Then one more: refused.
    assert.equal((await send(b, ['r3@cap.test', 'r4@cap.test'])).status, 200);
    const refused = await send(b, 'r5@cap.test');
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.deepEqual(refused.body.error.details, { category: 'transactional', limit: 5, usage: 5, requested: 1, remaining: 0 });
    const written = await env.server.sql(`SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND email = 'r5@cap.test'`, [b.project.id]);
    assert.equal(written[0].n, 0, 'the refused send wrote no contact');
    const emails = await env.server.sql(`SELECT count(*)::int AS n FROM emails WHERE project_id = $1`, [b.project.id]);
    assert.equal(emails[0].n, 5);

    const limits = await owner(b).get(limitsPath(b));
    assert.deepEqual(limits.body.transactional, { limit: 5, usage: 5, percentage: 100, isWarning: true, isBlocked: true });
    const consumption = await owner(b).get(`/users/@me/projects/${b.project.id}/billing-consumption`);
    assert.equal(consumption.status, 200);
    assert.deepEqual(consumption.body.usage, { total: 5, byCategory: { transactional: 5, campaigns: 0, workflows: 0, inbound: 0 } });

    // The owner got one 80 % warning (at 4 of 5) and one 100 % warning.
    const deadline = Date.now() + 10_000;
    const ownerEmail = (await owner(b).get('/users/@me')).body.email;
    const warnings = () => env.sink.messages.filter((m) => m.envelope.to.includes(ownerEmail) && /Tx Cap/.test(m.parsed.subject ?? ''));
    while (warnings().length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      warnings()
        .map((m) => m.parsed.subject)
        .sort(),
      ['Tx Cap: 80% of the monthly transactional limit used', 'Tx Cap: monthly transactional limit reached'],
    );
  });

  test("a campaign's test send is a transactional email: refused past that cap, by a MEMBER too, and nothing written", async () => {
    const b = await project('Test Cap');
    const c = await b.sk.post('/campaigns', { name: 'Draft', subject: 'S', body: '<p>B</p>', from: b.from });
    await owner(b).put(limitsPath(b), { transactional: 1 });
    const first = await b.sk.post(`/campaigns/${c.body.data.id}/test`, { email: 'first@test-cap.test' });
    assert.equal(first.status, 200, first.text);
    const m = await signupUser(env.server.api);
    await joinWithInvitation(env.server, await owner(b).post(`/projects/${b.project.id}/members`, { email: m.email }), m.cookie);
    const refused = await asMember(env.server.api, m.cookie, b.project.id).post(`/campaigns/${c.body.data.id}/test`, { email: 'victim@elsewhere.test' });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.deepEqual(refused.body.error.details, { category: 'transactional', limit: 1, usage: 1, requested: 1, remaining: 0 });
    const written = await env.server.sql(`SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND email = 'victim@elsewhere.test'`, [b.project.id]);
    assert.equal(written[0].n, 0, 'the refused test send wrote no contact');
    assert.equal((await owner(b).get(limitsPath(b))).body.transactional.usage, 1);
  });

  test('campaigns: a campaign larger than the remaining allowance is refused at send and at schedule time', async () => {
    const b = await project('Camp Cap');
    for (const email of ['a@cc.test', 'b@cc.test', 'c@cc.test']) await b.sk.post('/contacts', { email, subscribed: true });
    await owner(b).put(limitsPath(b), { campaigns: 2 });
    const c = await b.sk.post('/campaigns', { name: 'Big', subject: 'S', body: '<p>B</p>', from: b.from });
    const id = c.body.data.id;
    const now = await b.sk.post(`/campaigns/${id}/send`, {});
    assert.equal(now.status, 403, now.text);
    assert.equal(now.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.equal(now.body.error.details.requested, 3);
    const later = await b.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(Date.now() + 3600_000).toISOString() });
    assert.equal(later.status, 403, later.text);
    const row = await b.sk.get(`/campaigns/${id}`);
    assert.equal(row.body.status, 'DRAFT');
    assert.equal((await env.server.sql('SELECT count(*)::int AS n FROM emails WHERE campaign_id = $1', [id]))[0].n, 0);

    await owner(b).put(limitsPath(b), { campaigns: 3 });
    const ok = await b.sk.post(`/campaigns/${id}/send`, {});
    assert.equal(ok.status, 200, ok.text);
    const deadline = Date.now() + 15_000;
    while ((await b.sk.get(`/campaigns/${id}`)).body.status !== 'SENT' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const limits = await owner(b).get(limitsPath(b));
    assert.equal(limits.body.campaigns.usage, 3);
    assert.equal(limits.body.campaigns.isBlocked, true);
    const next = await b.sk.post('/campaigns', { name: 'One more', subject: 'S', body: '<p>B</p>', from: b.from });
    const refused = await b.sk.post(`/campaigns/${next.body.data.id}/send`, {});
    assert.equal(refused.status, 403, refused.text);
  });

  test('two campaigns that together pass the cap: the one past it stops, CANCELLED, its recipients the emails it wrote', async () => {
    const b = await project('Two Camps');
    for (const email of ['a@two.test', 'b@two.test', 'c@two.test']) await b.sk.post('/contacts', { email, subscribed: true });
    await owner(b).put(limitsPath(b), { campaigns: 4 });
    const ids: string[] = [];
    for (const name of ['First', 'Second']) ids.push((await b.sk.post('/campaigns', { name, subject: 'S', body: '<p>B</p>', from: b.from })).body.data.id);
    // Each fits the allowance when scheduled (3 of 4); together they do not. Both are due at one
    // time: sent one after the other, the first's emails could be counted before the second's send.
    const scheduledFor = new Date(Date.now() + 1500).toISOString();
    for (const id of ids) assert.equal((await b.sk.post(`/campaigns/${id}/send`, { scheduledFor })).status, 200);
    const deadline = Date.now() + 15_000;
    const ended = async () => Promise.all(ids.map(async (id) => (await b.sk.get(`/campaigns/${id}`)).body));
    while ((await ended()).some((c) => c.status === 'SENDING' || c.status === 'SCHEDULED') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    const outcomes = (await ended()).map((c) => ({ status: c.status, totalRecipients: c.totalRecipients }));
    assert.deepEqual(
      outcomes.sort((x, y) => x.status.localeCompare(y.status)),
      [
        { status: 'CANCELLED', totalRecipients: 0 },
        { status: 'SENT', totalRecipients: 3 },
      ],
    );
    assert.equal((await owner(b).get(limitsPath(b))).body.campaigns.usage, 3);
  });

  test('workflows: the function the SEND_EMAIL step calls refuses exactly the email past the cap', async () => {
    const b = await bootstrap(env.server.api, 'Wf Cap');
    await owner(b).put(limitsPath(b), { workflows: 1 });
    const ctx = env.server.ctx;
    await withTransaction(ctx.database, (t) => assertWithinBillingLimit(ctx, t, b.project.id, 'workflows', 1));
    await assert.rejects(
      withTransaction(ctx.database, (t) => assertWithinBillingLimit(ctx, t, b.project.id, 'workflows', 2)),
      (err: { statusCode: number; code: string }) => err.statusCode === 403 && err.code === 'BILLING_LIMIT_EXCEEDED',
    );
  });

  test('workflows: a SEND_EMAIL step past the cap fails its execution with the reason; the others send', async () => {
    const b = await project('Wf Step Cap');
    await owner(b).put(limitsPath(b), { workflows: 2 });
    const tpl = await b.sk.post('/templates', { name: 'Note', subject: 'Note for {{email}}', body: '<p>{{email}}</p>', from: b.from, type: 'TRANSACTIONAL' });
    assert.equal(tpl.status, 201, tpl.text);
    const wf = await buildWorkflow(b.sk, {
      eventName: 'capped.signup',
      steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } }],
      edges: [['trigger', 'send']],
    });
    const people = ['a@wfcap.test', 'b@wfcap.test', 'c@wfcap.test'];
    for (const email of people) {
      const res = await b.pk.post('/v1/track', { email, event: 'capped.signup' });
      assert.equal(res.status, 200, res.text);
    }
    type Exec = { status: string; error: string | null; email: string; step_status: string | null; step_error: string | null };
    const execs = await waitFor('three finished executions', async () => {
      const rows = await env.server.sql<Exec>(
        `SELECT x.status, x.error, c.email, s.status AS step_status, s.error AS step_error
           FROM workflow_executions x JOIN contacts c ON c.id = x.contact_id
           LEFT JOIN workflow_step_executions s ON s.execution_id = x.id AND s.step_id = $2
          WHERE x.workflow_id = $1`,
        [wf.id, wf.steps.send],
      );
      return rows.length === 3 && rows.every((r) => r.status !== 'RUNNING' && r.status !== 'WAITING') && rows;
    });
    const failed = execs.filter((e) => e.status === 'FAILED');
    assert.deepEqual(execs.map((e) => e.status).sort(), ['COMPLETED', 'COMPLETED', 'FAILED']);
    assert.match(failed[0].error!, /monthly workflows limit \(2 of 2 used/);
    assert.equal(failed[0].step_status, 'FAILED');
    assert.equal(failed[0].step_error, failed[0].error);
    const sentTo = execs.filter((e) => e.status === 'COMPLETED').map((e) => e.email);
    await env.sink.waitFor(1);
    await waitFor('two workflow emails in the sink', async () => sentTo.every((to) => env.sink.messages.some((m) => m.envelope.to.includes(to))));
    assert.ok(!env.sink.messages.some((m) => m.envelope.to.includes(failed[0].email)), 'no email past the cap');
    const limits = await owner(b).get(limitsPath(b));
    assert.equal(limits.body.workflows.usage, 2);
    assert.equal(limits.body.workflows.isBlocked, true);
  });

  test("a reset does not restore the month's allowance of sent mail", async () => {
    const b = await project('Reset Cap');
    await owner(b).put(limitsPath(b), { transactional: 2 });
    const sent = await send(b, ['x@rc.test', 'y@rc.test']);
    assert.equal(sent.status, 200);
    // Sent mail counts after a reset; mail the reset stopped before it left would not.
    for (const e of sent.body.data.emails) await waitForStatus(b.sk, e.email, ['SENT', 'DELIVERED']);
    assert.equal((await owner(b).post(`/users/@me/projects/${b.project.id}/reset`)).status, 200);
    const refused = await send(b, 'z@rc.test');
    assert.equal(refused.status, 403, refused.text);
    const limits = await owner(b).get(limitsPath(b));
    assert.equal(limits.body.transactional.usage, 2);
  });
});
