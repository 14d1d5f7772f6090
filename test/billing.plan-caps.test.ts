import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { withTransaction } from '../src/db/client.ts';
import { assertWithinBillingLimit } from '../src/modules/billing/limits.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type StripeEnv, startStripeEnv } from './helpers/fake-stripe.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * With Stripe on, the plan's caps (a live subscription's, else the free plan's: BILLING_FREE_PLAN_LIMITS,
 * 0 each by default) are a ceiling a project ADMIN cannot lift with PUT billing-limits; without Stripe
 * a project sets any caps, as before.
 */

let env: StripeEnv;
let server: TestServer;
let plain: TestServer;
/** Stripe on, with free caps of 2 transactional emails and unlimited campaigns (the same database and webhook secret). */
let freebie: TestServer;

before(async () => {
  env = await startStripeEnv('whsec_test_plan_caps');
  ({ server, plain } = env);
  freebie = await startTestServer(
    {
      STRIPE_SECRET_KEY: 'sk_test_fake',
      STRIPE_WEBHOOK_SECRET: 'whsec_test_plan_caps',
      STRIPE_API_BASE: env.fake.url,
      STRIPE_PRICE_ID: 'price_pro',
      BILLING_FREE_PLAN_LIMITS: 'transactional=2,campaigns=unlimited',
    },
    { databaseUrl: server.databaseUrl },
  );
});
after(async () => {
  await freebie?.stop();
  await env?.stop();
});

async function deliver(type: string, object: Record<string, unknown>, to: TestServer = server): Promise<void> {
  const { payload, header } = env.signed(type, object);
  const res = await to.api.post('/webhooks/incoming/payments', undefined, {
    raw: payload,
    headers: { 'content-type': 'application/json', 'stripe-signature': header },
  });
  assert.equal(res.status, 200, res.text);
}
const subscription = (customer: string, status: string, metadata: Record<string, string>) => ({
  id: `sub_${customer}`,
  object: 'subscription',
  customer,
  status,
  items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_pro', object: 'price', lookup_key: 'pro', metadata } }] },
});
const plan = (transactional: string, campaigns: string, workflows: string) => ({
  herald_transactional: transactional,
  herald_campaigns: campaigns,
  herald_workflows: workflows,
});

/** A project of the Stripe server with a Stripe customer (a checkout made), its owner's API and its customer id. */
async function subscriber(name: string, on: TestServer = server): Promise<{ b: Bootstrapped; api: Api; customer: string }> {
  const b = await bootstrap(on.api, name);
  const api = on.api.as({ cookie: b.cookie });
  assert.equal((await api.post(`/users/@me/projects/${b.project.id}/checkout`)).status, 200);
  const [{ stripe_customer_id: customer }] = await server.sql<{ stripe_customer_id: string }>(
    'SELECT stripe_customer_id FROM project_billing WHERE project_id = $1',
    [b.project.id],
  );
  return { b, api, customer };
}

const limitsPath = (b: Bootstrapped) => `/users/@me/projects/${b.project.id}/billing-limits`;
const sendOne = (b: Bootstrapped, to: string) => b.sk.post('/v1/send', { to, from: 'hello@sandbox.herald.test', subject: 's', body: 'hi' });
type View = Record<string, { limit: number | null; planLimit?: number | null; customLimit?: number | null }>;
const caps = (v: View, key: 'limit' | 'planLimit' | 'customLimit') => ['transactional', 'campaigns', 'workflows', 'inbound'].map((c) => v[c][key]);

describe('with Stripe: the plan caps a project', () => {
  test('after a cancellation, PUT null caps does not lift the 0 caps: sends, campaigns and workflow emails stay refused', async () => {
    const { b, api, customer } = await subscriber('Cancelled');
    await deliver('customer.subscription.created', subscription(customer, 'active', plan('1000', '1000', '1000')));
    await deliver('customer.subscription.deleted', subscription(customer, 'canceled', {}));

    const put = await api.put(limitsPath(b), { transactional: null, campaigns: null, workflows: null });
    assert.equal(put.status, 200, put.text);
    const view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [0, 0, 0, 0]);
    assert.deepEqual(caps(view, 'planLimit'), [0, 0, 0, 0]);
    assert.deepEqual(caps(view, 'customLimit'), [null, null, null, null]);
    assert.deepEqual(view.transactional, { limit: 0, usage: 0, percentage: 0, isWarning: true, isBlocked: true, planLimit: 0, customLimit: null });

    const refused = await sendOne(b, 'x@example.com');
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.deepEqual(refused.body.error.details, { category: 'transactional', limit: 0, usage: 0, requested: 1, remaining: 0 });
    assert.match(refused.body.error.suggestion, /plan's cap/);

    await b.sk.post('/contacts', { email: 'c@example.com', subscribed: true });
    const campaign = await b.sk.post('/campaigns', { name: 'C', subject: 'S', body: '<p>B</p>', from: 'hello@sandbox.herald.test' });
    assert.equal(campaign.status, 201, campaign.text);
    const campaignSend = await b.sk.post(`/campaigns/${campaign.body.data.id}/send`, {});
    assert.equal(campaignSend.status, 403, campaignSend.text);
    assert.equal(campaignSend.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.equal(campaignSend.body.error.details.limit, 0);

    const ctx = server.ctx;
    await assert.rejects(
      withTransaction(ctx.database, (t) => assertWithinBillingLimit(ctx, t, b.project.id, 'workflows', 1)),
      (err: { code: string; details: { limit: number } }) => err.code === 'BILLING_LIMIT_EXCEEDED' && err.details.limit === 0,
    );
    const [row] = await server.sql('SELECT plan, subscription_status FROM project_billing WHERE project_id = $1', [b.project.id]);
    assert.deepEqual(row, { plan: null, subscription_status: 'canceled' });
  });

  test("PUT refuses a cap above the plan's with 422 naming it; at or below it binds; plan changes move the ceiling", async () => {
    const { b, api, customer } = await subscriber('Paid');
    await deliver('customer.subscription.created', subscription(customer, 'active', plan('2', '1000', 'unlimited')));

    const over = await api.put(limitsPath(b), { transactional: 5000, campaigns: 1001, workflows: 7 });
    assert.equal(over.status, 422, over.text);
    assert.equal(over.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(over.body.error.errors, [
      { field: 'transactional', code: 'too_big', message: "At most 2, the plan's monthly transactional cap" },
      { field: 'campaigns', code: 'too_big', message: "At most 1000, the plan's monthly campaigns cap" },
    ]);
    assert.deepEqual(over.body.error.details, { planLimits: { transactional: 2, campaigns: 1000 } });
    let view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [2, 1000, null, null], 'nothing changed');
    assert.deepEqual(caps(view, 'customLimit'), [null, null, null, null]);

    // The plan's transactional 2 binds: the third send is refused.
    assert.equal((await sendOne(b, 'a@example.com')).status, 200);
    assert.equal((await sendOne(b, 'b@example.com')).status, 200);
    const third = await sendOne(b, 'c@example.com');
    assert.equal(third.status, 403, third.text);
    assert.deepEqual(third.body.error.details, { category: 'transactional', limit: 2, usage: 2, requested: 1, remaining: 0 });

    // At or below the plan's (and under an uncapped category, any): stored and binding.
    const within = await api.put(limitsPath(b), { transactional: 2, campaigns: 500, workflows: 7 });
    assert.equal(within.status, 200, within.text);
    assert.deepEqual(caps(within.body, 'limit'), [2, 500, 7, null]);
    assert.deepEqual(caps(within.body, 'planLimit'), [2, 1000, null, null]);
    assert.deepEqual(caps(within.body, 'customLimit'), [2, 500, 7, null]);

    // An upgrade lifts the ceiling but not the project's own caps; a downgrade below them binds.
    await deliver('customer.subscription.updated', subscription(customer, 'active', plan('10', '5000', '3')));
    view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [2, 500, 3, null]);
    const cleared = await api.put(limitsPath(b), { transactional: null });
    assert.deepEqual(caps(cleared.body, 'limit'), [10, 500, 3, null]);
    assert.equal((await sendOne(b, 'c@example.com')).status, 200, 'the upgraded plan allows a third send');
  });
});

describe('with Stripe: a project without a live subscription is on the free plan', () => {
  test('by default its caps are 0: nothing is sent before a subscription, and PUT cannot lift them', async () => {
    const b = await bootstrap(server.api, 'Never subscribed');
    const api = server.api.as({ cookie: b.cookie });
    const view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [0, 0, 0, 0]);
    assert.deepEqual(caps(view, 'planLimit'), [0, 0, 0, 0]);
    assert.deepEqual(caps(view, 'customLimit'), [null, null, null, null]);

    const refused = await sendOne(b, 'x@example.com');
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    assert.deepEqual(refused.body.error.details, { category: 'transactional', limit: 0, usage: 0, requested: 1, remaining: 0 });
    assert.match(refused.body.error.suggestion, /free plan's cap .*subscribe/);
    assert.equal((await server.sql('SELECT count(*)::int AS n FROM emails WHERE project_id = $1', [b.project.id]))[0].n, 0);

    const put = await api.put(limitsPath(b), { transactional: 10 });
    assert.equal(put.status, 422, put.text);
    assert.deepEqual(put.body.error.errors, [{ field: 'transactional', code: 'too_big', message: "At most 0, the free plan's monthly transactional cap" }]);
    assert.equal((await server.sql('SELECT count(*)::int AS n FROM project_billing WHERE project_id = $1', [b.project.id]))[0].n, 0, 'nothing stored');
  });

  test('BILLING_FREE_PLAN_LIMITS sets them; a cancelled subscription falls back to the same caps', async () => {
    const { b, api, customer } = await subscriber('Free, then paid, then free', freebie);
    let view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [2, null, 0, 0]);
    assert.deepEqual(caps(view, 'planLimit'), [2, null, 0, 0]);
    assert.equal((await sendOne(b, 'a@example.com')).status, 200);
    assert.equal((await sendOne(b, 'b@example.com')).status, 200);
    const third = await sendOne(b, 'c@example.com');
    assert.equal(third.status, 403, third.text);
    assert.deepEqual(third.body.error.details, { category: 'transactional', limit: 2, usage: 2, requested: 1, remaining: 0 });

    await deliver('customer.subscription.created', subscription(customer, 'active', plan('1000', '10', '5')), freebie);
    view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'planLimit'), [1000, 10, 5, null]);
    assert.equal((await sendOne(b, 'c@example.com')).status, 200, 'the plan allows a third send');

    await deliver('customer.subscription.deleted', subscription(customer, 'canceled', {}), freebie);
    view = (await api.get(limitsPath(b))).body as View;
    assert.deepEqual(caps(view, 'limit'), [2, null, 0, 0]);
    assert.deepEqual(caps(view, 'planLimit'), [2, null, 0, 0]);
    const [row] = await freebie.sql(
      'SELECT plan, subscription_status, plan_limit_transactional, plan_limit_campaigns, plan_limit_workflows, plan_limit_inbound FROM project_billing WHERE project_id = $1',
      [b.project.id],
    );
    assert.deepEqual(row, {
      plan: null,
      subscription_status: 'canceled',
      plan_limit_transactional: null,
      plan_limit_campaigns: null,
      plan_limit_workflows: null,
      plan_limit_inbound: null,
    });
    const refused = await sendOne(b, 'd@example.com');
    assert.equal(refused.status, 403, refused.text);
    assert.deepEqual(refused.body.error.details, { category: 'transactional', limit: 2, usage: 3, requested: 1, remaining: 0 });
  });

  test("a subscription that is not live (incomplete, unpaid) gives the free caps, not its price's", async () => {
    const { b, api, customer } = await subscriber('Incomplete', freebie);
    await deliver('customer.subscription.created', subscription(customer, 'incomplete', plan('1000', '10', '5')), freebie);
    assert.deepEqual(caps((await api.get(limitsPath(b))).body as View, 'limit'), [2, null, 0, 0]);
    await deliver('customer.subscription.updated', subscription(customer, 'active', plan('1000', '10', '5')), freebie);
    assert.deepEqual(caps((await api.get(limitsPath(b))).body as View, 'limit'), [1000, 10, 5, null]);
    await deliver('customer.subscription.updated', subscription(customer, 'unpaid', plan('1000', '10', '5')), freebie);
    assert.deepEqual(caps((await api.get(limitsPath(b))).body as View, 'limit'), [2, null, 0, 0]);
  });
});

describe('without Stripe', () => {
  test('a project sets any caps, and plan caps left in the row (Stripe since turned off) do not bind', async () => {
    const b = await bootstrap(plain.api, 'Self-hosted');
    const api = plain.api.as({ cookie: b.cookie });
    await plain.sql(
      `INSERT INTO project_billing (project_id, plan_limit_transactional, plan_limit_campaigns, plan_limit_workflows, plan_limit_inbound, subscription_status)
       VALUES ($1, 0, 0, 0, 0, 'canceled')`,
      [b.project.id],
    );
    const put = await api.put(limitsPath(b), { transactional: 5000, campaigns: null });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(put.body.transactional, { limit: 5000, usage: 0, percentage: 0, isWarning: false, isBlocked: false });
    assert.deepEqual(put.body.campaigns, { limit: null, usage: 0, percentage: null, isWarning: false, isBlocked: false });
    const sent = await sendOne(b, 'x@example.com');
    assert.equal(sent.status, 200, sent.text);
    assert.equal((await api.get(limitsPath(b))).body.transactional.usage, 1);
  });
});
