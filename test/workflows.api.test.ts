import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { signupUser } from './helpers/team.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let dns: TestDns;
let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;

// Strictly increasing time, so creation order is the createdAt order even within one millisecond.
let last = 0;
const clock = { now: () => new Date((last = Math.max(Date.now(), last + 1))) };

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address }, { clock });
  a = await bootstrap(server.api, 'Project A');
  b = await bootstrap(server.api, 'Project B');
  await verifyDomain(a.sk, dns, 'acme.test');
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function createWorkflow(api: Api, body: Record<string, unknown> = {}) {
  const res = await api.post('/workflows', { name: 'Welcome series', eventName: 'signed_up', ...body });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function addStep(api: Api, workflowId: string, body: Record<string, unknown>) {
  const res = await api.post(`/workflows/${workflowId}/steps`, body);
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function link(api: Api, workflowId: string, fromStepId: string, toStepId: string, branch?: string) {
  const res = await api.post(`/workflows/${workflowId}/transitions`, { fromStepId, toStepId, ...(branch ? { branch } : {}) });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function template(api: Api, over: Record<string, unknown> = {}) {
  const res = await api.post('/templates', { name: 'Welcome', subject: 'Hi', body: '<p>Hello</p>', from: 'hello@acme.test', ...over });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const triggerOf = (w: { steps: { id: string; type: string }[] }) => w.steps.find((s) => s.type === 'TRIGGER')!;

describe('workflows', () => {
  test('POST /workflows → 201 disabled EVENT workflow with its TRIGGER step; GET returns the same', async () => {
    const w = await createWorkflow(a.sk, { description: 'Onboarding', allowReentry: true });
    assert.match(w.id, UUID_V7);
    assert.deepEqual(
      { ...w, id: undefined, createdAt: undefined, updatedAt: undefined, steps: undefined },
      {
        id: undefined,
        projectId: a.project.id,
        name: 'Welcome series',
        description: 'Onboarding',
        triggerType: 'EVENT',
        triggerConfig: { eventName: 'signed_up' },
        eventName: 'signed_up',
        enabled: false,
        allowReentry: true,
        createdAt: undefined,
        updatedAt: undefined,
        steps: undefined,
        transitions: [],
        activeExecutions: 0,
      },
    );
    assert.equal(w.steps.length, 1);
    assert.equal(w.steps[0].type, 'TRIGGER');
    assert.deepEqual(w.steps[0].counts, { entered: 0, completed: 0, waiting: 0, failed: 0, skipped: 0 });
    const got = await a.sk.get(`/workflows/${w.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, w);
    // Another project cannot see it.
    const other = await b.sk.get(`/workflows/${w.id}`);
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, 'WORKFLOW_NOT_FOUND');
  });

  test('list: page-paginated, newest first, with search and the enabled filter', async () => {
    const p = await bootstrap(server.api, 'List project');
    await verifyDomain(p.sk, dns, 'list.test');
    const t = await template(p.sk, { from: 'hi@list.test' });
    const names = ['Alpha drip', 'Beta nudge', 'Gamma drip'];
    const made = [];
    for (const name of names) made.push(await createWorkflow(p.sk, { name, eventName: `${name.split(' ')[0].toLowerCase()}_event` }));
    // Enable Gamma: it needs a runnable graph.
    const send = await addStep(p.sk, made[2].id, { type: 'SEND_EMAIL', config: { templateId: t.id } });
    await link(p.sk, made[2].id, triggerOf(made[2]).id, send.id);
    const enabled = await p.sk.patch(`/workflows/${made[2].id}`, { enabled: true });
    assert.equal(enabled.status, 200, enabled.text);

    const page1 = await p.sk.get('/workflows?pageSize=2');
    assert.equal(page1.status, 200);
    assert.deepEqual(
      page1.body.data.map((w: { name: string }) => w.name),
      ['Gamma drip', 'Beta nudge'],
    );
    assert.deepEqual({ ...page1.body, data: undefined }, { data: undefined, total: 3, page: 1, pageSize: 2, totalPages: 2 });
    const page2 = await p.sk.get('/workflows?pageSize=2&page=2');
    assert.deepEqual(
      page2.body.data.map((w: { name: string }) => w.name),
      ['Alpha drip'],
    );

    const drips = await p.sk.get('/workflows?search=DRIP');
    assert.deepEqual(
      drips.body.data.map((w: { name: string }) => w.name),
      ['Gamma drip', 'Alpha drip'],
    );
    const byEvent = await p.sk.get('/workflows?search=beta_event');
    assert.deepEqual(
      byEvent.body.data.map((w: { name: string }) => w.name),
      ['Beta nudge'],
    );
    const on = await p.sk.get('/workflows?enabled=true');
    assert.deepEqual(
      on.body.data.map((w: { name: string }) => w.name),
      ['Gamma drip'],
    );
    const off = await p.sk.get('/workflows?enabled=false');
    assert.equal(off.body.total, 2);
    const bad = await p.sk.get('/workflows?enabled=maybe');
    assert.equal(bad.status, 422);
  });

  test('PATCH changes name, description, trigger event (eventName or triggerConfig) and allowReentry', async () => {
    const w = await createWorkflow(a.sk);
    const res = await a.sk.patch(`/workflows/${w.id}`, { name: 'Renamed', description: '', eventName: 'segment.vip-users.entry', allowReentry: true });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.description, null);
    assert.deepEqual(res.body.triggerConfig, { eventName: 'segment.vip-users.entry' });
    assert.equal(res.body.allowReentry, true);
    const viaConfig = await a.sk.patch(`/workflows/${w.id}`, { triggerType: 'EVENT', triggerConfig: { eventName: 'contact.unsubscribed' } });
    assert.equal(viaConfig.status, 200, viaConfig.text);
    assert.equal(viaConfig.body.eventName, 'contact.unsubscribed');
  });

  test('DELETE /workflows/:id → 204, then 404', async () => {
    const w = await createWorkflow(a.sk);
    const del = await a.sk.delete(`/workflows/${w.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).status, 404);
  });
});

describe('steps and transitions', () => {
  test('a welcome-series graph: every step type stored with its parsed config, branches linked', async () => {
    const t1 = await template(a.sk, { name: 'Welcome 1' });
    const t2 = await template(a.sk, { name: 'Tips' });
    const t3 = await template(a.sk, { name: 'Nudge' });
    const w = await createWorkflow(a.sk);
    const trigger = triggerOf(w);
    const send = await addStep(a.sk, w.id, { type: 'SEND_EMAIL', name: 'Welcome', config: { templateId: t1.id }, position: { x: 0, y: 100 } });
    assert.deepEqual(send.config, { templateId: t1.id, recipient: { type: 'CONTACT' } });
    assert.deepEqual(send.position, { x: 0, y: 100 });
    assert.equal(send.name, 'Welcome');
    const delay = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 2, unit: 'days' } });
    assert.deepEqual(delay.config, { amount: 2, unit: 'days' });
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } });
    assert.deepEqual(cond.config, { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] });
    const tips = await addStep(a.sk, w.id, { type: 'SEND_EMAIL', config: { templateId: t2.id, recipient: { type: 'CUSTOM', email: 'Team@Acme.test' } } });
    assert.deepEqual(tips.config.recipient, { type: 'CUSTOM', email: 'team@acme.test' });
    const wait = await addStep(a.sk, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 86400 } });
    const nudge = await addStep(a.sk, w.id, { type: 'SEND_EMAIL', config: { templateId: t3.id } });
    const hook = await addStep(a.sk, w.id, {
      type: 'WEBHOOK',
      config: { url: 'https://hooks.example.com/users/{{id}}', headers: { 'X-Plan': '{{data.plan}}' }, body: { email: '{{email}}' } },
    });
    assert.equal(hook.config.method, 'POST');
    const update = await addStep(a.sk, w.id, { type: 'UPDATE_CONTACT', config: { data: { onboarded: true }, subscribed: true } });
    assert.deepEqual(update.config, { data: { onboarded: true }, subscribed: true });
    const exit = await addStep(a.sk, w.id, { type: 'EXIT', config: { reason: 'activated' } });
    assert.deepEqual(exit.config, { reason: 'activated' });

    await link(a.sk, w.id, trigger.id, send.id);
    await link(a.sk, w.id, send.id, delay.id);
    await link(a.sk, w.id, delay.id, cond.id);
    const yes = await link(a.sk, w.id, cond.id, tips.id, 'yes');
    assert.equal(yes.branch, 'yes');
    await link(a.sk, w.id, cond.id, wait.id, 'no');
    await link(a.sk, w.id, wait.id, hook.id, 'event');
    await link(a.sk, w.id, wait.id, nudge.id, 'timeout');
    await link(a.sk, w.id, hook.id, update.id);
    await link(a.sk, w.id, update.id, exit.id);

    const got = await a.sk.get(`/workflows/${w.id}`);
    assert.equal(got.body.steps.length, 10);
    assert.equal(got.body.transitions.length, 9);
    assert.deepEqual(
      got.body.steps.map((s: { type: string }) => s.type),
      ['TRIGGER', 'SEND_EMAIL', 'DELAY', 'CONDITION', 'SEND_EMAIL', 'WAIT_FOR_EVENT', 'SEND_EMAIL', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'],
    );
    const enabled = await a.sk.patch(`/workflows/${w.id}`, { enabled: true });
    assert.equal(enabled.status, 200, enabled.text);
    assert.equal(enabled.body.enabled, true);

    // A template a step sends cannot be deleted; usage names the workflow and step.
    const usage = await a.sk.get(`/templates/${t1.id}/usage`);
    assert.deepEqual(usage.body.workflows, [{ id: w.id, name: 'Welcome series', stepId: send.id }]);
    const refused = await a.sk.delete(`/templates/${t1.id}`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'CONFLICT');
    assert.match(refused.body.error.message, /workflow "Welcome series"/);
  });

  test('PATCH a step replaces its config (validated for its type); DELETE a transition', async () => {
    const w = await createWorkflow(a.sk);
    const delay = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'hours' } });
    const changed = await a.sk.patch(`/workflows/${w.id}/steps/${delay.id}`, { config: { amount: 30, unit: 'minutes' }, name: 'Short pause' });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(changed.body.config, { amount: 30, unit: 'minutes' });
    assert.equal(changed.body.name, 'Short pause');
    const bad = await a.sk.patch(`/workflows/${w.id}/steps/${delay.id}`, { config: { amount: 0, unit: 'minutes' } });
    assert.equal(bad.status, 400);
    assert.deepEqual((await a.sk.get(`/workflows/${w.id}`)).body.steps[1].config, { amount: 30, unit: 'minutes' });
    const typeChange = await a.sk.patch(`/workflows/${w.id}/steps/${delay.id}`, { type: 'EXIT' });
    assert.equal(typeChange.status, 400);

    const t = await link(a.sk, w.id, triggerOf(w).id, delay.id);
    const del = await a.sk.delete(`/workflows/${w.id}/transitions/${t.id}`);
    assert.equal(del.status, 204);
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).body.transitions.length, 0);
    const again = await a.sk.delete(`/workflows/${w.id}/transitions/${t.id}`);
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'WORKFLOW_TRANSITION_NOT_FOUND');
  });

  test('PATCH a transition points it at another step, keeping its id, step and branch: a step inserted between two without a moment unlinked', async () => {
    const w = await createWorkflow(a.sk);
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'subscribed', operator: 'equals', value: true } });
    const exit = await addStep(a.sk, w.id, { type: 'EXIT' });
    await link(a.sk, w.id, triggerOf(w).id, cond.id);
    const yes = await link(a.sk, w.id, cond.id, exit.id, 'yes');
    // Insert a delay between the condition's yes and the exit: the delay, its link on, then the yes moved.
    const delay = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    await link(a.sk, w.id, delay.id, exit.id);
    const moved = await a.sk.patch(`/workflows/${w.id}/transitions/${yes.id}`, { toStepId: delay.id });
    assert.equal(moved.status, 200, moved.text);
    assert.deepEqual(moved.body, { ...yes, toStepId: delay.id });
    const got = (await a.sk.get(`/workflows/${w.id}`)).body;
    assert.deepEqual(
      got.transitions.map((t: { fromStepId: string; toStepId: string; branch: string | null }) => [t.fromStepId, t.toStepId, t.branch]),
      [
        [triggerOf(w).id, cond.id, null],
        [cond.id, delay.id, 'yes'],
        [delay.id, exit.id, null],
      ],
    );
    const refused = async (toStepId: string, transitionId = yes.id) => {
      const res = await a.sk.patch(`/workflows/${w.id}/transitions/${transitionId}`, { toStepId });
      return [res.status, res.body.error?.message];
    };
    assert.deepEqual(await refused(cond.id), [400, 'A step cannot link to itself']);
    assert.deepEqual(await refused(triggerOf(w).id), [400, 'Nothing can link into the TRIGGER step: every execution starts there']);
    const back = (await a.sk.get(`/workflows/${w.id}`)).body.transitions.find((t: { fromStepId: string }) => t.fromStepId === delay.id);
    assert.deepEqual(await refused(cond.id, back.id), [400, `Linking ${'DELAY'} step ${delay.id} to CONDITION step ${cond.id} would make a cycle`]);
    const foreign = await createWorkflow(b.sk);
    assert.equal((await b.sk.patch(`/workflows/${foreign.id}/transitions/${yes.id}`, { toStepId: delay.id })).status, 404);
    assert.equal((await a.sk.patch(`/workflows/${w.id}/transitions/${yes.id}`, { toStepId: delay.id, branch: 'no' })).status, 400);
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).body.transitions.find((t: { id: string }) => t.id === yes.id).toStepId, delay.id);
  });

  test('DELETE a step with ?splice=true reconnects its parent to its child, keeping the branch', async () => {
    const w = await createWorkflow(a.sk);
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'subscribed', operator: 'equals', value: true } });
    const delay = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    const exit = await addStep(a.sk, w.id, { type: 'EXIT' });
    await link(a.sk, w.id, triggerOf(w).id, cond.id);
    await link(a.sk, w.id, cond.id, delay.id, 'yes');
    await link(a.sk, w.id, delay.id, exit.id);

    const spliced = await a.sk.delete(`/workflows/${w.id}/steps/${delay.id}?splice=true`);
    assert.equal(spliced.status, 204, spliced.text);
    const got = (await a.sk.get(`/workflows/${w.id}`)).body;
    assert.deepEqual(
      got.steps.map((s: { id: string }) => s.id),
      [triggerOf(w).id, cond.id, exit.id],
    );
    assert.deepEqual(
      got.transitions.map((t: { fromStepId: string; toStepId: string; branch: string | null }) => [t.fromStepId, t.toStepId, t.branch]),
      [
        [triggerOf(w).id, cond.id, null],
        [cond.id, exit.id, 'yes'],
      ],
    );
    // Without splice the step's transitions go with it.
    const plain = await a.sk.delete(`/workflows/${w.id}/steps/${exit.id}`);
    assert.equal(plain.status, 204);
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).body.transitions.length, 1);
    // A step with two branches cannot be spliced out.
    const n1 = await addStep(a.sk, w.id, { type: 'EXIT' });
    const n2 = await addStep(a.sk, w.id, { type: 'EXIT' });
    await link(a.sk, w.id, cond.id, n1.id, 'yes');
    await link(a.sk, w.id, cond.id, n2.id, 'no');
    const refused = await a.sk.delete(`/workflows/${w.id}/steps/${cond.id}?splice=true`);
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /leads to 2 different steps; to splice it out, its branches must lead to one step/);
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).body.steps.length, 4);
  });

  test('DELETE ?splice=true of a condition whose two branches lead to one step: its parent then leads there', async () => {
    const w = await createWorkflow(a.sk);
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'subscribed', operator: 'equals', value: true } });
    const join = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    await link(a.sk, w.id, triggerOf(w).id, cond.id);
    await link(a.sk, w.id, cond.id, join.id, 'yes');
    await link(a.sk, w.id, cond.id, join.id, 'no');
    const spliced = await a.sk.delete(`/workflows/${w.id}/steps/${cond.id}?splice=true`);
    assert.equal(spliced.status, 204, spliced.text);
    const got = (await a.sk.get(`/workflows/${w.id}`)).body;
    assert.deepEqual(
      got.transitions.map((t: { fromStepId: string; toStepId: string; branch: string | null }) => [t.fromStepId, t.toStepId, t.branch]),
      [[triggerOf(w).id, join.id, null]],
    );
  });

  test('enabling validates the whole graph and names the bad step', async () => {
    const w = await createWorkflow(a.sk);
    const empty = await a.sk.patch(`/workflows/${w.id}`, { enabled: true });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.details.stepType, 'TRIGGER');
    const delay = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    const orphan = await addStep(a.sk, w.id, { type: 'EXIT', name: 'Lost exit' });
    await link(a.sk, w.id, triggerOf(w).id, delay.id);
    const res = await a.sk.patch(`/workflows/${w.id}`, { enabled: true, name: 'Not applied' });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'BAD_REQUEST');
    assert.match(res.body.error.message, /"Lost exit" \(EXIT, [0-9a-f-]+\) has no path from the trigger/);
    assert.equal(res.body.error.details.stepId, orphan.id);
    assert.deepEqual(
      res.body.error.errors.map((e: { field: string }) => e.field),
      [`steps.${orphan.id}`],
    );
    const unchanged = (await a.sk.get(`/workflows/${w.id}`)).body;
    assert.equal(unchanged.enabled, false);
    assert.equal(unchanged.name, 'Welcome series');
    // A CONDITION with only one branch linked is fine.
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'data.plan', operator: 'exists' } });
    await link(a.sk, w.id, delay.id, cond.id);
    await link(a.sk, w.id, cond.id, orphan.id, 'yes');
    const ok = await a.sk.patch(`/workflows/${w.id}`, { enabled: true });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.enabled, true);
    const off = await a.sk.patch(`/workflows/${w.id}`, { enabled: false });
    assert.equal(off.body.enabled, false);
  });
});

describe('GET /workflows/fields', () => {
  test('contact fields with types and operators, and event.* context fields from trigger events', async () => {
    const p = await bootstrap(server.api, 'Fields project');
    const created = await p.sk.post('/contacts', { email: 'f@example.com', data: { plan: 'pro', seats: 3 } });
    assert.equal(created.status, 201, created.text);
    await createWorkflow(p.sk, { eventName: 'order_placed' });
    const tracked = await p.pk.post('/v1/track', {
      email: 'f@example.com',
      event: 'order_placed',
      data: { orderId: { value: 'A-1', persistent: false }, total: { value: 42, persistent: false } },
    });
    assert.equal(tracked.status, 200, tracked.text);
    const res = await p.sk.get('/workflows/fields');
    assert.equal(res.status, 200, res.text);
    const byField = new Map(res.body.fields.map((f: { field: string }) => [f.field, f]));
    assert.deepEqual(
      res.body.fields.filter((f: { source: string }) => f.source === 'contact').map((f: { field: string; type: string }) => [f.field, f.type]),
      [
        ['email', 'string'],
        ['subscribed', 'boolean'],
        ['createdAt', 'date'],
        ['updatedAt', 'date'],
        ['data.plan', 'string'],
        ['data.seats', 'number'],
      ],
    );
    const seats = byField.get('data.seats') as { operators: string[] };
    assert.ok(seats.operators.includes('greaterThan'));
    const events = res.body.fields.filter((f: { source: string }) => f.source === 'event');
    assert.deepEqual(
      events.map((f: { field: string; type: string; eventNames: string[] }) => [f.field, f.type, f.eventNames]),
      [
        ['event.orderId', 'string', ['order_placed']],
        ['event.total', 'number', ['order_placed']],
      ],
    );
  });
});

describe('project webhook secret', () => {
  test('shown on the project and rotated by regenerate-webhook-secret', async () => {
    const p = await bootstrap(server.api, 'Secret project');
    const original = (p.project as unknown as { webhookSecret: string }).webhookSecret;
    assert.match(original, /^whsec_[0-9a-f]{64}$/);
    const rotated = await server.api.post(`/users/@me/projects/${p.project.id}/regenerate-webhook-secret`, undefined, { cookie: p.cookie });
    assert.equal(rotated.status, 200, rotated.text);
    assert.match(rotated.body.webhookSecret, /^whsec_[0-9a-f]{64}$/);
    assert.notEqual(rotated.body.webhookSecret, original);
    // The secret key is stored hashed: shown at creation only, never on a later answer.
    assert.equal(rotated.body.secretKey, null);
    assert.equal(rotated.body.secretKeyPrefix, (p.project as unknown as { secretKeyPrefix: string }).secretKeyPrefix);
    const listed = await server.api.get('/users/@me/projects', { cookie: p.cookie });
    assert.equal(listed.body[0].webhookSecret, rotated.body.webhookSecret);
    const stranger = await bootstrap(server.api, 'Stranger');
    const refused = await server.api.post(`/users/@me/projects/${p.project.id}/regenerate-webhook-secret`, undefined, { cookie: stranger.cookie });
    assert.equal(refused.status, 404);
  });

  test('a MEMBER does not see it (null); an ADMIN does', async () => {
    const p = await bootstrap(server.api, 'Team secret');
    const [member, admin] = [await signupUser(server.api), await signupUser(server.api)];
    for (const [user, role] of [
      [member, 'MEMBER'],
      [admin, 'ADMIN'],
    ] as const) {
      await joinWithInvitation(
        server,
        await server.api.post(`/projects/${p.project.id}/members`, { email: user.email, role }, { cookie: p.cookie }),
        user.cookie,
      );
    }
    const secret = (p.project as unknown as { webhookSecret: string }).webhookSecret;
    const seenBy = async (cookie: string) =>
      (await server.api.get('/users/@me/projects', { cookie })).body.map((x: { role: string; webhookSecret: string | null }) => [x.role, x.webhookSecret]);
    assert.deepEqual(await seenBy(member.cookie), [['MEMBER', null]]);
    assert.deepEqual(await seenBy(admin.cookie), [['ADMIN', secret]]);
    assert.deepEqual(await seenBy(p.cookie), [['OWNER', secret]]);
  });
});

describe('executions', () => {
  async function delayedWorkflow(api: Api, name = 'Delayed') {
    const w = await createWorkflow(api, { name, eventName: `${name.toLowerCase()}_started` });
    const delay = await addStep(api, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    const exit = await addStep(api, w.id, { type: 'EXIT' });
    await link(api, w.id, triggerOf(w).id, delay.id);
    await link(api, w.id, delay.id, exit.id);
    const on = await api.patch(`/workflows/${w.id}`, { enabled: true });
    assert.equal(on.status, 200, on.text);
    return { w, delay, exit };
  }

  async function waitFor<T>(fn: () => Promise<T | undefined>, what: string, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await fn();
      if (v !== undefined) return v;
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  test('start by id or email with a context; list by status with cursor paging; get with step history; per-step counts; upcoming', async () => {
    const p = await bootstrap(server.api, 'Executions project');
    const { w, delay } = await delayedWorkflow(p.sk);
    const contacts = [];
    for (const i of [1, 2, 3]) {
      const c = await p.sk.post('/contacts', { email: `exec${i}@example.com` });
      assert.equal(c.status, 201, c.text);
      contacts.push(c.body);
    }
    const first = await p.sk.post(`/workflows/${w.id}/executions`, { contactId: contacts[0].id, context: { source: 'api', orderId: 7 } });
    assert.equal(first.status, 201, first.text);
    assert.match(first.body.id, UUID_V7, 'execution ids are UUID v7 (decisions.md § 2)');
    assert.equal(first.body.workflowId, w.id);
    assert.deepEqual(first.body.contact, { id: contacts[0].id, email: 'exec1@example.com' });
    assert.deepEqual(first.body.context, { source: 'api', orderId: 7 });
    const byEmail = await p.sk.post(`/workflows/${w.id}/executions`, { email: ' EXEC2@example.com ' });
    assert.equal(byEmail.status, 201, byEmail.text);
    assert.equal(byEmail.body.contactId, contacts[1].id);
    const third = await p.sk.post(`/workflows/${w.id}/executions`, { contactId: contacts[2].id });
    assert.equal(third.status, 201, third.text);
    // One active execution per workflow and contact.
    const again = await p.sk.post(`/workflows/${w.id}/executions`, { contactId: contacts[0].id });
    assert.equal(again.status, 409);

    // All three reach the DELAY and wait there.
    const waiting = await waitFor(async () => {
      const res = await p.sk.get(`/workflows/${w.id}/executions?status=waiting`);
      return res.body.data.length === 3 ? res.body : undefined;
    }, 'three waiting executions');
    assert.equal(waiting.total, 3);
    const one = waiting.data.find((e: { id: string }) => e.id === first.body.id);
    assert.equal(one.status, 'WAITING');
    assert.equal(one.currentStepId, delay.id);
    const dueIn = Date.parse(one.dueAt) - Date.now();
    assert.ok(dueIn > 23 * 3600_000 && dueIn <= 24 * 3600_000 + 60_000, `due in ${dueIn} ms`);

    const page1 = await p.sk.get(`/workflows/${w.id}/executions?limit=2`);
    assert.equal(page1.status, 200);
    assert.deepEqual(
      page1.body.data.map((e: { id: string }) => e.id),
      [third.body.id, byEmail.body.id],
    );
    assert.equal(page1.body.hasMore, true);
    assert.equal(page1.body.total, 3);
    const page2 = await p.sk.get(`/workflows/${w.id}/executions?limit=2&cursor=${page1.body.cursor}`);
    assert.deepEqual(
      page2.body.data.map((e: { id: string }) => e.id),
      [first.body.id],
    );
    assert.equal(page2.body.hasMore, false);
    assert.equal(page2.body.cursor, undefined);
    assert.equal(page2.body.total, 0, 'as every cursor list past its first page');
    const none = await p.sk.get(`/workflows/${w.id}/executions?status=COMPLETED`);
    assert.deepEqual({ ...none.body }, { data: [], hasMore: false, total: 0 });

    const detail = await p.sk.get(`/workflows/${w.id}/executions/${first.body.id}`);
    assert.equal(detail.status, 200);
    assert.deepEqual(
      detail.body.stepExecutions.map((s: { stepType: string; status: string }) => [s.stepType, s.status]),
      [
        ['TRIGGER', 'COMPLETED'],
        ['DELAY', 'WAITING'],
      ],
    );

    const got = (await p.sk.get(`/workflows/${w.id}`)).body;
    assert.equal(got.activeExecutions, 3);
    const counts = new Map(got.steps.map((s: { type: string; counts: unknown }) => [s.type, s.counts]));
    assert.deepEqual(counts.get('TRIGGER'), { entered: 3, completed: 3, waiting: 0, failed: 0, skipped: 0 });
    assert.deepEqual(counts.get('DELAY'), { entered: 3, completed: 0, waiting: 3, failed: 0, skipped: 0 });
    assert.deepEqual(counts.get('EXIT'), { entered: 0, completed: 0, waiting: 0, failed: 0, skipped: 0 });

    const upcoming = await p.sk.get('/activity/upcoming');
    assert.equal(upcoming.status, 200, upcoming.text);
    const items = upcoming.body.data.filter((i: { type: string }) => i.type === 'workflow');
    assert.equal(items.length, 3);
    const item = items.find((i: { id: string }) => i.id === first.body.id);
    assert.equal(item.name, 'Delayed');
    assert.equal(item.scheduledFor, one.dueAt);
    assert.deepEqual(item.contact, { id: contacts[0].id, email: 'exec1@example.com' });
    assert.equal(item.details.stepType, 'DELAY');
    assert.equal(item.details.workflowId, w.id);

    // A step with executions waiting at it cannot be deleted.
    const busy = await p.sk.delete(`/workflows/${w.id}/steps/${delay.id}?splice=true`);
    assert.equal(busy.status, 409);
    assert.equal(busy.body.error.details.activeExecutions, 3);
    assert.equal((await p.sk.get(`/workflows/${w.id}`)).body.steps.length, 3);

    // Cancel one: 200 with the cancelled execution; cancelling again changes nothing.
    const cancelled = await p.sk.delete(`/workflows/${w.id}/executions/${first.body.id}`);
    assert.equal(cancelled.status, 200, cancelled.text);
    assert.equal(cancelled.body.status, 'CANCELLED');
    assert.equal(cancelled.body.dueAt, null);
    assert.ok(cancelled.body.completedAt);
    const twice = await p.sk.delete(`/workflows/${w.id}/executions/${first.body.id}`);
    assert.equal(twice.status, 200);
    assert.equal(twice.body.status, 'CANCELLED');

    // Deleting the workflow is refused while executions are active.
    const refused = await p.sk.delete(`/workflows/${w.id}`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'CONFLICT');
    assert.equal(refused.body.error.details.activeExecutions, 2);

    const all = await p.sk.post(`/workflows/${w.id}/executions/cancel-all`);
    assert.equal(all.status, 200, all.text);
    assert.deepEqual(all.body, { cancelled: 2 });
    const cancelledList = await p.sk.get(`/workflows/${w.id}/executions?status=CANCELLED`);
    assert.equal(cancelledList.body.total, 3);
    assert.equal((await p.sk.get('/activity/upcoming')).body.data.filter((i: { type: string }) => i.type === 'workflow').length, 0);
    const deleted = await p.sk.delete(`/workflows/${w.id}`);
    assert.equal(deleted.status, 204);
  });

  test('event-name and field usage include workflow triggers, waits and conditions; a used field cannot be deleted', async () => {
    const p = await bootstrap(server.api, 'Usage project');
    const c = await p.sk.post('/contacts', { email: 'usage@example.com', data: { plan: 'pro', profile: { tier: 'gold' } } });
    assert.equal(c.status, 201, c.text);
    const byTrigger = await createWorkflow(p.sk, { name: 'By trigger', eventName: 'order_placed' });
    const byWait = await createWorkflow(p.sk, { name: 'By wait', eventName: 'signed_up' });
    await addStep(p.sk, byWait.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'order_placed', timeout: 3600 } });
    const byCondition = await createWorkflow(p.sk, { name: 'By condition', eventName: 'signed_up' });
    await addStep(p.sk, byCondition.id, {
      type: 'CONDITION',
      config: {
        logic: 'AND',
        groups: [
          {
            filters: [
              { field: 'event.order_placed', operator: 'triggered' },
              { field: 'data.profile.tier', operator: 'equals', value: 'gold' },
            ],
          },
        ],
      },
    });
    const byUpdate = await createWorkflow(p.sk, { name: 'By update', eventName: 'signed_up' });
    await addStep(p.sk, byUpdate.id, { type: 'UPDATE_CONTACT', config: { data: { plan: 'enterprise' } } });

    const events = await p.sk.get('/events/order_placed/usage');
    assert.equal(events.status, 200, events.text);
    assert.deepEqual(events.body.workflows, [
      { id: byTrigger.id, name: 'By trigger' },
      { id: byWait.id, name: 'By wait' },
      { id: byCondition.id, name: 'By condition' },
    ]);
    assert.equal(events.body.canDelete, false);
    const refusedEvent = await p.sk.delete('/events/order_placed');
    assert.equal(refusedEvent.status, 409);

    const profile = await p.sk.get('/contacts/fields/data.profile/usage');
    assert.deepEqual(profile.body.workflows, [{ id: byCondition.id, name: 'By condition' }]);
    const plan = await p.sk.get('/contacts/fields/data.plan/usage');
    assert.deepEqual(plan.body.workflows, [{ id: byUpdate.id, name: 'By update' }]);
    const refusedField = await p.sk.delete('/contacts/fields/data.profile');
    assert.equal(refusedField.status, 409);
    const unused = await p.sk.get('/contacts/fields/data.other/usage');
    assert.deepEqual(unused.body.workflows, []);
  });
});
