import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { recheckVerifiedDomainsQueue } from '../src/modules/domains/jobs.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api, Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let dns: TestDns;
let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address });
  a = await bootstrap(server.api, 'Project A');
  b = await bootstrap(server.api, 'Project B');
  await verifyDomain(a.sk, dns, 'acme.test');
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

async function createWorkflow(api: Api, body: Record<string, unknown> = {}) {
  const res = await api.post('/workflows', { name: 'Flow', eventName: 'signed_up', ...body });
  assert.equal(res.status, 201, res.text);
  return res.body as { id: string; steps: { id: string; type: string }[] };
}

async function addStep(api: Api, workflowId: string, body: Record<string, unknown>) {
  const res = await api.post(`/workflows/${workflowId}/steps`, body);
  assert.equal(res.status, 201, res.text);
  return res.body as { id: string; config: Record<string, unknown> };
}

async function link(api: Api, workflowId: string, fromStepId: string, toStepId: string, branch?: string) {
  const res = await api.post(`/workflows/${workflowId}/transitions`, { fromStepId, toStepId, ...(branch ? { branch } : {}) });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** A 400 BAD_REQUEST in the spec's error body, whose field errors include `field`. */
function assert400(res: Res, field: string | null, message?: RegExp) {
  assert.equal(res.status, 400, res.text);
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, 'BAD_REQUEST');
  assert.equal(res.body.error.statusCode, 400);
  if (field !== null)
    assert.ok(
      res.body.error.errors.some((e: { field: string }) => e.field === field),
      res.text,
    );
  if (message) assert.match(res.body.error.message, message);
}

async function graphSize(workflowId: string) {
  const got = await a.sk.get(`/workflows/${workflowId}`);
  return { steps: got.body.steps.length, transitions: got.body.transitions.length };
}

describe('workflow create and update', () => {
  test('missing name or eventName → the simple 400 body', async () => {
    for (const [body, message] of [
      [{ eventName: 'x' }, 'name is required'],
      [{ name: 'x', eventName: '  ' }, 'eventName is required'],
      [{}, 'name and eventName are required'],
    ] as const) {
      const res = await a.sk.post('/workflows', body);
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { error: message });
    }
    assert.equal((await a.sk.get('/workflows')).body.total, 0);
  });

  test('a reserved-looking event name that the service never emits → 422; triggerType other than EVENT → 422', async () => {
    for (const eventName of ['email.sendt', 'Contact.Subscribed', 'segment.VIP Users.entry', 'email.']) {
      const res = await a.sk.post('/workflows', { name: 'x', eventName });
      assert.equal(res.status, 422, `${eventName}: ${res.text}`);
      assert.equal(res.body.error.errors[0].field, 'eventName');
    }
    const w = await createWorkflow(a.sk);
    const bad = await a.sk.patch(`/workflows/${w.id}`, { triggerType: 'SCHEDULE' });
    assert.equal(bad.status, 422);
    const unknown = await a.sk.patch(`/workflows/${w.id}`, { colour: 'red' });
    assert.equal(unknown.status, 422);
  });

  test('unknown, malformed and other projects’ workflow ids → 404 WORKFLOW_NOT_FOUND', async () => {
    const w = await createWorkflow(a.sk);
    for (const [api, path] of [
      [a.sk, '/workflows/not-a-uuid'],
      [a.sk, '/workflows/01900000-0000-7000-8000-000000000000'],
      [b.sk, `/workflows/${w.id}`],
    ] as const) {
      const res = await api.get(path);
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'WORKFLOW_NOT_FOUND');
    }
    const step = await b.sk.post(`/workflows/${w.id}/steps`, { type: 'EXIT' });
    assert.equal(step.status, 404);
    const del = await b.sk.delete(`/workflows/${w.id}`);
    assert.equal(del.status, 404);
    assert.equal((await a.sk.get(`/workflows/${w.id}`)).status, 200);
  });
});

describe('step config validation', () => {
  let w: { id: string; steps: { id: string; type: string }[] };
  before(async () => {
    w = await createWorkflow(a.sk, { name: 'Config checks' });
  });

  const bad = async (body: Record<string, unknown>, field: string | null, message?: RegExp) => {
    const res = await a.sk.post(`/workflows/${w.id}/steps`, body);
    assert400(res, field, message);
    return res;
  };

  test('unknown step type, TRIGGER, and a non-object body → 400', async () => {
    await bad({ type: 'SEND_SMS', config: {} }, 'type', /Unknown step type 'SEND_SMS'/);
    await bad({ type: 'TRIGGER' }, 'type', /created with the workflow/);
    const res = await a.sk.post(`/workflows/${w.id}/steps`, ['EXIT']);
    assert.equal(res.status, 400);
    assert.deepEqual(await graphSize(w.id), { steps: 1, transitions: 0 });
  });

  test('DELAY of 0, of -1, of 400 days, with unit weeks, fractional, or missing → 400 naming the field', async () => {
    await bad({ type: 'DELAY', config: { amount: 0, unit: 'days' } }, 'config.amount', /at least 1/);
    await bad({ type: 'DELAY', config: { amount: -1, unit: 'minutes' } }, 'config.amount');
    await bad({ type: 'DELAY', config: { amount: 400, unit: 'days' } }, 'config.amount', /at most 365 days/);
    await bad({ type: 'DELAY', config: { amount: 9000, unit: 'hours' } }, 'config.amount', /at most 365 days/);
    await bad({ type: 'DELAY', config: { amount: 2, unit: 'weeks' } }, 'config.unit', /'minutes', 'hours' or 'days'/);
    await bad({ type: 'DELAY', config: { amount: 1.5, unit: 'days' } }, 'config.amount');
    await bad({ type: 'DELAY' }, 'config.amount');
    // 365 days is the limit itself.
    await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 365, unit: 'days' } });
  });

  test('WAIT_FOR_EVENT with a reserved-looking but invalid name, or a timeout over a year → 400', async () => {
    for (const eventName of ['email.sendt', 'contact.Subscribed', 'segment.Big Spenders.exit', 'email.opened.twice']) {
      await bad({ type: 'WAIT_FOR_EVENT', config: { eventName } }, 'config.eventName', /never emitted/);
    }
    await bad({ type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 365 * 86400 + 1 } }, 'config.timeout', /one year/);
    await bad({ type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 0 } }, 'config.timeout');
    await bad({ type: 'WAIT_FOR_EVENT', config: { eventName: '' } }, 'config.eventName');
    const ok = await addStep(a.sk, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'segment.big-spenders.exit', timeout: 365 * 86400 } });
    assert.deepEqual(ok.config, { eventName: 'segment.big-spenders.exit', timeout: 31536000 });
    const emitted = await addStep(a.sk, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'email.opened' } });
    assert.deepEqual(emitted.config, { eventName: 'email.opened' });
  });

  test('CONDITION with a bad tree → 400 with the condition engine’s message', async () => {
    await bad(
      { type: 'CONDITION', config: { logic: 'XOR', groups: [{ filters: [{ field: 'email', operator: 'exists' }] }] } },
      'config.logic',
      /logic must be 'AND' or 'OR'/,
    );
    await bad({ type: 'CONDITION', config: { logic: 'AND', groups: [] } }, 'config.groups', /non-empty array/);
    await bad({ type: 'CONDITION', config: { field: 'data.plan', operator: 'resembles', value: 'x' } }, null, /resembles/);
    await bad({ type: 'CONDITION', config: { field: 'nickname', operator: 'equals', value: 'x' } }, null, /Unknown field 'nickname'/);
    await bad({ type: 'CONDITION', config: { field: 'data.plan', operator: 'triggered' } }, null, /triggered/);
    await bad({ type: 'CONDITION', config: { field: 'event.total', operator: 'in', value: 'not-a-list' } }, null, /event\.total/);
    const segment = await bad({ type: 'CONDITION', config: { field: 'segment.01900000-0000-7000-8000-000000000000', operator: 'memberOf' } }, null);
    assert.equal(segment.body.error.details.type, 'CONDITION');
    await bad({ type: 'CONDITION' }, 'config.groups');
    // Context fields take value operators; tracked-event operators keep the contact's events.
    const ctx = await addStep(a.sk, w.id, {
      type: 'CONDITION',
      config: {
        logic: 'OR',
        groups: [
          { filters: [{ field: 'event.total', operator: 'greaterThan', value: 100 }] },
          { filters: [{ field: 'event.purchased', operator: 'triggeredWithin', value: 7, unit: 'days' }] },
        ],
      },
    });
    assert.equal((ctx.config as { groups: { filters: { field: string }[] }[] }).groups[0].filters[0].field, 'event.total');
  });

  test('WEBHOOK with ftp://, no host, a metadata or loopback address, {{variables}} in the host, a bad header → 400', async () => {
    await bad({ type: 'WEBHOOK', config: { url: 'ftp://files.example.com/x' } }, 'config.url', /http or https/);
    await bad({ type: 'WEBHOOK', config: { url: 'http:///just-a-path' } }, 'config.url', /needs a host/);
    await bad({ type: 'WEBHOOK', config: { url: '/relative' } }, 'config.url', /absolute/);
    await bad({ type: 'WEBHOOK', config: { url: 'http://169.254.169.254/latest/meta-data/' } }, 'config.url', /private, loopback, link-local or metadata/);
    await bad({ type: 'WEBHOOK', config: { url: 'http://127.0.0.1:8080/' } }, 'config.url', /WEBHOOK_ALLOW_PRIVATE_NETWORKS/);
    await bad({ type: 'WEBHOOK', config: { url: 'http://[::1]/' } }, 'config.url');
    await bad({ type: 'WEBHOOK', config: { url: 'http://[::ffff:10.0.0.1]/' } }, 'config.url');
    await bad({ type: 'WEBHOOK', config: { url: 'http://localhost/' } }, 'config.url');
    await bad({ type: 'WEBHOOK', config: { url: 'http://metadata.google.internal/' } }, 'config.url');
    await bad({ type: 'WEBHOOK', config: { url: 'https://{{data.host}}/x' } }, 'config.url', /host/);
    await bad({ type: 'WEBHOOK', config: { url: 'https://user:pw@hooks.example.com/' } }, 'config.url', /credentials/);
    await bad({ type: 'WEBHOOK', config: { url: 'https://hooks.example.com/', headers: { 'X-A\r\nInjected': 'x' } } }, 'config.headers.X-A\r\nInjected');
    await bad({ type: 'WEBHOOK', config: { url: 'https://hooks.example.com/', headers: { 'X-A': 'line\r\nInjected: 1' } } }, 'config.headers.X-A', /CR or LF/);
    await bad(
      { type: 'WEBHOOK', config: { url: 'https://hooks.example.com/', headers: { 'X-Herald-Signature': 'forged' } } },
      'config.headers.X-Herald-Signature',
    );
    await bad({ type: 'WEBHOOK', config: { url: 'https://hooks.example.com/', method: 'TRACE' } }, 'config.method');
    await bad({ type: 'WEBHOOK', config: { url: 'https://hooks.example.com/', body: { big: 'x'.repeat(70_000) } } }, 'config.body');
    assert.deepEqual(await graphSize(w.id), { steps: 1 + 3 + 1, transitions: 0 });
  });

  test('UPDATE_CONTACT drops email and reserved keys as the custom-data rules do; nothing left → 400', async () => {
    const step = await addStep(a.sk, w.id, {
      type: 'UPDATE_CONTACT',
      config: { data: { email: 'evil@example.com', id: 'cnt_x', unsubscribeUrl: 'x', plan: 'pro', trial: null } },
    });
    assert.deepEqual(step.config, { data: { plan: 'pro', trial: null } });
    await bad({ type: 'UPDATE_CONTACT', config: { data: { email: 'evil@example.com' } } }, 'config', /nothing to update/);
    await bad({ type: 'UPDATE_CONTACT', config: { email: 'evil@example.com' } }, 'config');
    await bad({ type: 'UPDATE_CONTACT', config: { subscribed: 'yes' } }, 'config.subscribed');
  });

  test('SEND_EMAIL with an unknown template or another project’s template → 400; EXIT with a long reason → 400', async () => {
    await verifyDomain(b.sk, dns, 'beta.test');
    const theirs = await b.sk.post('/templates', { name: 'T', subject: 'S', body: 'B', from: 'x@beta.test' });
    assert.equal(theirs.status, 201, theirs.text);
    await bad({ type: 'SEND_EMAIL', config: { templateId: theirs.body.id } }, 'config.templateId', /does not exist in this project/);
    await bad({ type: 'SEND_EMAIL', config: { templateId: 'abc' } }, 'config.templateId');
    await bad({ type: 'SEND_EMAIL', config: { templateId: theirs.body.id, recipient: { type: 'CUSTOM' } } }, 'config.recipient.email');
    await bad({ type: 'EXIT', config: { reason: 'x'.repeat(501) } }, 'config.reason');
  });
});

describe('transition rules', () => {
  test('another workflow’s step, a second yes, a cycle, a self-link, out of EXIT, into TRIGGER, wrong branches → 400, graph unchanged', async () => {
    const w = await createWorkflow(a.sk);
    const other = await createWorkflow(a.sk, { name: 'Other' });
    const trigger = w.steps[0].id;
    const cond = await addStep(a.sk, w.id, { type: 'CONDITION', config: { field: 'subscribed', operator: 'equals', value: true } });
    const d1 = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    const d2 = await addStep(a.sk, w.id, { type: 'DELAY', config: { amount: 2, unit: 'days' } });
    const wait = await addStep(a.sk, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'activated' } });
    const exit = await addStep(a.sk, w.id, { type: 'EXIT' });
    const foreign = await addStep(a.sk, other.id, { type: 'EXIT' });
    await link(a.sk, w.id, trigger, cond.id);
    await link(a.sk, w.id, cond.id, d1.id, 'yes');
    await link(a.sk, w.id, d1.id, d2.id);
    const before = await graphSize(w.id);

    const post = (body: Record<string, unknown>) => a.sk.post(`/workflows/${w.id}/transitions`, body);
    assert400(await post({ fromStepId: d2.id, toStepId: foreign.id }), 'toStepId', /not a step of this workflow/);
    assert400(await post({ fromStepId: other.steps[0].id, toStepId: d2.id }), 'fromStepId', /not a step of this workflow/);
    assert400(await post({ fromStepId: cond.id, toStepId: d2.id, branch: 'yes' }), 'branch', /already has a 'yes' branch/);
    assert400(await post({ fromStepId: d2.id, toStepId: cond.id }), 'toStepId', /cycle/);
    assert400(await post({ fromStepId: d2.id, toStepId: d2.id }), 'toStepId', /itself/);
    assert400(await post({ fromStepId: exit.id, toStepId: d2.id }), 'fromStepId', /EXIT/);
    assert400(await post({ fromStepId: d2.id, toStepId: trigger }), 'toStepId', /TRIGGER/);
    assert400(await post({ fromStepId: cond.id, toStepId: exit.id }), 'branch', /'yes' or 'no'/);
    assert400(await post({ fromStepId: cond.id, toStepId: exit.id, branch: 'event' }), 'branch', /'yes' or 'no'/);
    assert400(await post({ fromStepId: wait.id, toStepId: exit.id, branch: 'no' }), 'branch', /'event' or 'timeout'/);
    assert400(await post({ fromStepId: d2.id, toStepId: exit.id, branch: 'yes' }), 'branch', /no branch/);
    assert400(await post({ fromStepId: d1.id, toStepId: exit.id }), 'branch', /already has its outgoing transition/);
    assert400(await post({ fromStepId: d2.id, toStepId: exit.id, branch: 'maybe' }), 'branch');
    assert400(await post({ fromStepId: d2.id }), 'toStepId');
    assert.deepEqual(await graphSize(w.id), before);
  });
});

describe('enabling, executions and deletion', () => {
  test('PATCH enabled: true with a template whose sender domain is no longer verified → 400 naming the step', async () => {
    const p = await bootstrap(server.api, 'Unverified sender');
    const domain = await verifyDomain(p.sk, dns, 'fading.test');
    const t = await p.sk.post('/templates', { name: 'Hello', subject: 'S', body: 'B', from: 'hi@fading.test' });
    assert.equal(t.status, 201, t.text);
    const w = await createWorkflow(p.sk);
    const send = await addStep(p.sk, w.id, { type: 'SEND_EMAIL', name: 'Say hello', config: { templateId: t.body.id } });
    await link(p.sk, w.id, w.steps[0].id, send.id);
    const dkim = domain.records.find((r: { purpose: string; type: string }) => r.type === 'TXT' && /dkim/i.test(r.purpose));
    dns.remove(dkim.name, 'TXT');
    await recheckVerifiedDomainsQueue.handler(server.ctx, {}, { id: 'test' });
    const res = await p.sk.patch(`/workflows/${w.id}`, { enabled: true });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.error.message, /"Say hello" \(SEND_EMAIL, .*\) sends template "Hello" from hi@fading\.test: Domain fading\.test is not verified/);
    assert.equal(res.body.error.details.stepId, send.id);
    assert.equal((await p.sk.get(`/workflows/${w.id}`)).body.enabled, false);
  });

  test('executions for a contact of another project, an unknown contact, or neither id nor email → 404 / 422', async () => {
    const w = await createWorkflow(a.sk);
    const theirs = await b.sk.post('/contacts', { email: 'theirs@example.com' });
    assert.equal(theirs.status, 201, theirs.text);
    const byId = await a.sk.post(`/workflows/${w.id}/executions`, { contactId: theirs.body.id });
    assert.equal(byId.status, 404);
    assert.equal(byId.body.error.code, 'CONTACT_NOT_FOUND');
    const byEmail = await a.sk.post(`/workflows/${w.id}/executions`, { email: 'theirs@example.com' });
    assert.equal(byEmail.status, 404);
    assert.equal(byEmail.body.error.code, 'CONTACT_NOT_FOUND');
    const neither = await a.sk.post(`/workflows/${w.id}/executions`, { context: {} });
    assert.equal(neither.status, 422);
    const both = await a.sk.post(`/workflows/${w.id}/executions`, { contactId: theirs.body.id, email: 'x@example.com' });
    assert.equal(both.status, 422);
    const list = await a.sk.get(`/workflows/${w.id}/executions?status=SLEEPING`);
    assert.equal(list.status, 422);
    const get = await a.sk.get(`/workflows/${w.id}/executions/01900000-0000-7000-8000-000000000000`);
    assert.equal(get.status, 404);
    assert.equal(get.body.error.code, 'WORKFLOW_EXECUTION_NOT_FOUND');
    const { rows } = { rows: await server.sql('SELECT count(*)::int AS n FROM workflow_executions') };
    assert.equal(rows[0].n, 0);
  });

  test('a disabled workflow takes no manual executions → 409', async () => {
    const w = await createWorkflow(a.sk);
    const c = await a.sk.post('/contacts', { email: 'disabled-start@example.com' });
    const res = await a.sk.post(`/workflows/${w.id}/executions`, { contactId: c.body.id });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'CONFLICT');
    assert.match(res.body.error.message, /disabled/);
  });
});

describe('no bad input answers 500', () => {
  test('junk bodies, ids, queries and cursors on every workflow endpoint → 4xx, never 500', async () => {
    const w = await createWorkflow(a.sk, { name: 'Junk target' });
    const step = w.steps[0].id;
    const junk: unknown[] = [
      null,
      [],
      'text',
      42,
      { type: null },
      { type: 'DELAY', config: 'x' },
      { type: 'CONDITION', config: { groups: [{ filters: [null] }] } },
      { type: 'CONDITION', config: { logic: 'AND', groups: [{ filters: [{ field: 'data.a', operator: 'equals', value: { deep: [1, { x: 2 }] } }] }] } },
      { type: 'WEBHOOK', config: { url: 'http://[::1' } },
      { type: 'WEBHOOK', config: { url: 'https://exa mple.com/' } },
      { fromStepId: step, toStepId: 'x'.repeat(100) },
      { contactId: 'cnt_zz' },
      { email: 'nope' },
      { context: { a: '\u0000' } },
      { context: [1] },
    ];
    const paths: [string, string][] = [
      ['POST', '/workflows'],
      ['PATCH', `/workflows/${w.id}`],
      ['POST', `/workflows/${w.id}/steps`],
      ['PATCH', `/workflows/${w.id}/steps/${step}`],
      ['POST', `/workflows/${w.id}/transitions`],
      ['POST', `/workflows/${w.id}/executions`],
    ];
    for (const [method, path] of paths) {
      for (const body of junk) {
        if (body === null && method === 'PATCH') continue; // a null PATCH body changes nothing (200), as for templates
        const res = await a.sk.request(method, path, { body });
        assert.ok(res.status >= 400 && res.status < 500, `${method} ${path} ${JSON.stringify(body)} → ${res.status} ${res.text}`);
      }
    }
    for (const path of [
      `/workflows/${w.id}/executions?cursor=garbage`,
      `/workflows/${w.id}/executions?cursor=${Buffer.from('{"x":1}').toString('base64url')}`,
      `/workflows/${w.id}/executions?limit=-5`,
      '/workflows?page=0',
      '/workflows/fields?workflowId=nope',
      `/workflows/${w.id}/executions/not-a-uuid`,
    ]) {
      const res = await a.sk.get(path);
      assert.ok(res.status >= 400 && res.status < 500, `${path} → ${res.status} ${res.text}`);
    }
    // Deeply nested JSON (within the 1 MiB body limit) wherever the API walks a value; sent as raw text.
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const deepObject = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    for (const [path, raw] of [
      [`/workflows/${w.id}/steps`, `{"type":"CONDITION","config":{"logic":"AND","groups":${deep(100_000)}}}`],
      [`/workflows/${w.id}/steps`, `{"type":"CONDITION","config":{"field":"data.a","operator":"in","value":${deep(100_000)}}}`],
      [`/workflows/${w.id}/steps`, `{"type":"WEBHOOK","config":{"url":"https://hooks.example.com/","body":${deepObject(50_000)}}}`],
      [`/workflows/${w.id}/steps`, `{"type":"UPDATE_CONTACT","config":{"data":{"a":${deepObject(50_000)}}}}`],
      [`/workflows/${w.id}/executions`, `{"email":"x@example.com","context":{"a":${deepObject(50_000)}}}`],
    ] as const) {
      const res = await a.sk.request('POST', path, { raw, headers: { 'content-type': 'application/json' } });
      assert.ok(res.status >= 400 && res.status < 500, `${raw.slice(0, 60)} → ${res.status} ${res.text.slice(0, 200)}`);
    }
    const splice = await a.sk.delete(`/workflows/${w.id}/steps/${step}?splice=maybe`);
    assert.equal(splice.status, 422);
    const trigger = await a.sk.delete(`/workflows/${w.id}/steps/${step}`);
    assert.equal(trigger.status, 400);
    assert.deepEqual(await graphSize(w.id), { steps: 1, transitions: 0 });
  });
});
