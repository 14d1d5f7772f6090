import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type FakeStripe, type StripeEnv, startStripeEnv } from './helpers/fake-stripe.ts';
import type { TestServer } from './helpers/server.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { asMember, signupUser } from './helpers/team.ts';

const WEBHOOK_SECRET = 'whsec_test_0123456789';

let env: StripeEnv;
let fake: FakeStripe;
let server: TestServer;
let plain: TestServer;
let b: Bootstrapped;
let signed: StripeEnv['signed'];

before(async () => {
  env = await startStripeEnv(WEBHOOK_SECRET);
  ({ fake, server, plain, signed } = env);
  b = await bootstrap(server.api, 'Paying');
});
after(() => env?.stop());

const deliver = (e: { payload: string; header?: string }) =>
  server.api.post('/webhooks/incoming/payments', undefined, {
    raw: e.payload,
    headers: { 'content-type': 'application/json', ...(e.header !== undefined && { 'stripe-signature': e.header }) },
  });

const subscription = (
  customer: string,
  status = 'active',
  metadata: Record<string, string> = { herald_transactional: '50000', herald_campaigns: '100000', herald_workflows: 'unlimited' },
) => ({
  id: 'sub_fake',
  object: 'subscription',
  customer,
  status,
  items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_pro', object: 'price', lookup_key: 'pro', metadata } }] },
});

describe('without STRIPE_SECRET_KEY', () => {
  test('checkout, portal, invoices and the webhook are 404 BILLING_DISABLED; /config says billingEnabled false', async () => {
    const p = await bootstrap(plain.api, 'Free');
    const api = plain.api.as({ cookie: p.cookie });
    for (const [method, path] of [
      ['POST', `/users/@me/projects/${p.project.id}/checkout`],
      ['POST', `/users/@me/projects/${p.project.id}/billing-portal`],
      ['GET', `/users/@me/projects/${p.project.id}/billing-invoices`],
      ['POST', '/webhooks/incoming/payments'],
    ] as const) {
      const res = await api.request(method, path, method === 'POST' ? { body: {} } : {});
      assert.equal(res.status, 404, `${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'BILLING_DISABLED');
    }
    const config = await plain.api.get('/config');
    assert.equal(config.body.billingEnabled, false);
    const oauth = await plain.api.get('/auth/oauth-config');
    assert.equal(oauth.status, 200);
    assert.deepEqual(oauth.body, { github: false, google: false });
    // Caps work without a payment provider.
    assert.equal((await api.put(`/users/@me/projects/${p.project.id}/billing-limits`, { transactional: 10 })).status, 200);
  });
});

describe('with Stripe', () => {
  test('checkout creates the customer once and a subscription session for the configured price', async () => {
    const api = server.api.as({ cookie: b.cookie });
    const res = await api.post(`/users/@me/projects/${b.project.id}/checkout`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { url: 'https://checkout.stripe.test/c/cs_fake' });
    const again = await api.post(`/users/@me/projects/${b.project.id}/checkout`);
    assert.equal(again.status, 200);
    assert.equal(fake.calls.filter((c) => c.path === '/v1/customers').length, 1, 'one customer per project');
    const session = fake.calls.find((c) => c.method === 'POST' && c.path === '/v1/checkout/sessions')!;
    assert.equal(session.form.get('mode'), 'subscription');
    assert.equal(session.form.get('customer'), 'cus_fake1');
    assert.equal(session.form.get('line_items[0][price]'), 'price_pro');
    assert.equal(session.form.get('client_reference_id'), b.project.id);
    assert.equal((await server.api.get('/config')).body.billingEnabled, true);
  });

  test('a checkout still open is answered again, not a second session (two sessions paid were two subscriptions); once it is done or expired, a new one', async () => {
    const p = await bootstrap(server.api, 'Twice');
    const api = server.api.as({ cookie: p.cookie });
    const first = await api.post(`/users/@me/projects/${p.project.id}/checkout`);
    assert.equal(first.status, 200, first.text);
    const again = await api.post(`/users/@me/projects/${p.project.id}/checkout`);
    assert.deepEqual(again.body, first.body);
    const mine = () => fake.sessions.filter((s) => s.metadata.projectId === p.project.id);
    assert.equal(mine().length, 1, 'one session for two clicks');
    assert.equal(mine()[0].metadata.heraldPrice, 'price_pro');
    mine()[0].status = 'expired';
    const fresh = await api.post(`/users/@me/projects/${p.project.id}/checkout`);
    assert.equal(fresh.status, 200, fresh.text);
    assert.notEqual(fresh.body.url, first.body.url);
    assert.equal(mine().length, 2);
  });

  test('portal and invoices', async () => {
    const api = server.api.as({ cookie: b.cookie });
    const portal = await api.post(`/users/@me/projects/${b.project.id}/billing-portal`);
    assert.equal(portal.status, 200, portal.text);
    assert.deepEqual(portal.body, { url: 'https://billing.stripe.test/p/bps_fake' });
    const invoices = await api.get(`/users/@me/projects/${b.project.id}/billing-invoices`);
    assert.equal(invoices.status, 200, invoices.text);
    assert.deepEqual(invoices.body.data[0], {
      id: 'in_1',
      number: 'HER-0001',
      status: 'paid',
      amountDue: 2900,
      amountPaid: 2900,
      currency: 'eur',
      createdAt: new Date(1_790_000_000_000).toISOString(),
      hostedInvoiceUrl: 'https://invoice.stripe.test/in_1',
      pdfUrl: 'https://invoice.stripe.test/in_1.pdf',
    });
    assert.equal(fake.calls.at(-1)!.query.get('customer'), 'cus_fake1');
  });

  test('a MEMBER cannot start a checkout', async () => {
    const m = await signupUser(server.api);
    await joinWithInvitation(server, await server.api.post(`/projects/${b.project.id}/members`, { email: m.email }, { cookie: b.cookie }), m.cookie);
    const res = await asMember(server.api, m.cookie, b.project.id).post(`/users/@me/projects/${b.project.id}/checkout`);
    assert.equal(res.status, 403, res.text);
  });

  test('subscription events keep plan and caps in step; bad signatures change nothing; replays are processed once', async () => {
    const limits = () => server.api.get(`/users/@me/projects/${b.project.id}/billing-limits`, { cookie: b.cookie });
    const created = signed('customer.subscription.created', subscription('cus_fake1'));

    const missing = await deliver({ payload: created.payload });
    assert.equal(missing.status, 400, missing.text);
    const forged = await deliver({ payload: created.payload, header: created.header.replace(/v1=[0-9a-f]+/, `v1=${'0'.repeat(64)}`) });
    assert.equal(forged.status, 400, forged.text);
    const tampered = await deliver({ payload: created.payload.replace('50000', '99999999'), header: created.header });
    assert.equal(tampered.status, 400, tampered.text);
    assert.equal((await limits()).body.transactional.limit, 0, "nothing changed: the free plan's cap (BILLING_FREE_PLAN_LIMITS, 0 by default)");
    assert.equal((await server.sql('SELECT count(*)::int AS n FROM payment_events'))[0].n, 0);

    const ok = await deliver(created);
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { received: true });
    let l = (await limits()).body;
    assert.deepEqual([l.transactional.limit, l.campaigns.limit, l.workflows.limit, l.inbound.limit], [50000, 100000, null, null]);
    const [row] = await server.sql('SELECT plan, subscription_status FROM project_billing WHERE project_id = $1', [b.project.id]);
    assert.deepEqual(row, { plan: 'pro', subscription_status: 'active' });
    assert.equal((await server.api.get(`/projects/${b.project.id}/setup-state`, { cookie: b.cookie })).body.hasSubscription, true);

    // Replayed: acknowledged, not processed again (a later update is not overwritten by it).
    const updated = signed('customer.subscription.updated', subscription('cus_fake1', 'active', { herald_transactional: '60000' }));
    assert.equal((await deliver(updated)).status, 200);
    const replay = await deliver(created);
    assert.equal(replay.status, 200);
    assert.deepEqual(replay.body, { received: true, duplicate: true });
    l = (await limits()).body;
    assert.equal(l.transactional.limit, 60000);

    const unknown = await deliver(signed('charge.refunded', { id: 'ch_1', object: 'charge' }));
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.body, { received: true, ignored: true });

    const deleted = await deliver(signed('customer.subscription.deleted', subscription('cus_fake1', 'canceled')));
    assert.equal(deleted.status, 200);
    l = (await limits()).body;
    assert.deepEqual([l.transactional.limit, l.campaigns.limit, l.workflows.limit, l.inbound.limit], [0, 0, 0, 0]);
    assert.equal((await server.api.get(`/projects/${b.project.id}/setup-state`, { cookie: b.cookie })).body.hasSubscription, false);
  });

  test('a failed renewal payment disables the project (BILLING) until an invoice is paid', async () => {
    const first = await deliver(
      signed('invoice.payment_failed', { id: 'in_2', object: 'invoice', customer: 'cus_fake1', billing_reason: 'subscription_create' }),
    );
    assert.equal(first.status, 200);
    assert.equal((await b.sk.get('/contacts')).status, 200, 'a failed first payment does not disable');

    assert.equal(
      (await deliver(signed('invoice.payment_failed', { id: 'in_3', object: 'invoice', customer: 'cus_fake1', billing_reason: 'subscription_cycle' }))).status,
      200,
    );
    const refused = await b.sk.get('/contacts');
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'PROJECT_DISABLED');
    const [p] = await server.sql('SELECT disabled, disabled_reason FROM projects WHERE id = $1', [b.project.id]);
    assert.deepEqual(p, { disabled: true, disabled_reason: 'BILLING' });

    assert.equal(
      (await deliver(signed('invoice.paid', { id: 'in_3', object: 'invoice', customer: 'cus_fake1', billing_reason: 'subscription_cycle' }))).status,
      200,
    );
    assert.equal((await b.sk.get('/contacts')).status, 200);
  });
});

describe('with Stripe: subscription events out of order', () => {
  /** A project with a Stripe customer (a checkout made): its owner's API and its customer id. */
  async function subscriber(name: string) {
    const p = await bootstrap(server.api, name);
    const api = server.api.as({ cookie: p.cookie });
    assert.equal((await api.post(`/users/@me/projects/${p.project.id}/checkout`)).status, 200);
    const [{ stripe_customer_id: customer }] = await server.sql<{ stripe_customer_id: string }>(
      'SELECT stripe_customer_id FROM project_billing WHERE project_id = $1',
      [p.project.id],
    );
    return { p, api, customer };
  }
  const sub = (id: string, customer: string, status: string, created: number, metadata: Record<string, string>) => ({
    ...subscription(customer, status, metadata),
    id,
    created,
  });
  const row = async (projectId: string) =>
    (
      await server.sql(
        `SELECT plan, subscription_status, stripe_subscription_id, plan_limit_transactional, plan_limit_campaigns
           FROM project_billing WHERE project_id = $1`,
        [projectId],
      )
    )[0];

  test('a late update after the deletion changes nothing: the cancelled project has no plan again', async () => {
    const { p, api, customer } = await subscriber('Late update');
    const at = 1_800_000_000;
    assert.equal(
      (await deliver(signed('customer.subscription.updated', sub('sub_a', customer, 'active', at, { herald_transactional: '1000' }), undefined, at + 100)))
        .status,
      200,
    );
    assert.equal((await deliver(signed('customer.subscription.deleted', sub('sub_a', customer, 'canceled', at, {}), undefined, at + 300))).status, 200);
    const late = await deliver(
      signed(
        'customer.subscription.updated',
        sub('sub_a', customer, 'active', at, { herald_transactional: 'unlimited', herald_campaigns: 'unlimited' }),
        undefined,
        at + 200,
      ),
    );
    assert.equal(late.status, 200, late.text);
    assert.deepEqual(late.body, { received: true, ignored: true });
    assert.deepEqual(await row(p.project.id), {
      plan: null,
      subscription_status: 'canceled',
      stripe_subscription_id: 'sub_a',
      plan_limit_transactional: null,
      plan_limit_campaigns: null,
    });
    assert.equal((await api.get(`/projects/${p.project.id}/setup-state`)).body.hasSubscription, false);
  });

  test('an older event of the same subscription, or its late `created`, does not undo a newer one', async () => {
    const { p, customer } = await subscriber('Late created');
    const at = 1_800_000_000;
    await deliver(signed('customer.subscription.updated', sub('sub_b', customer, 'active', at, { herald_transactional: '2000' }), undefined, at));
    const created = await deliver(
      signed('customer.subscription.created', sub('sub_b', customer, 'incomplete', at, { herald_transactional: '2000' }), undefined, at),
    );
    assert.deepEqual(created.body, { received: true, ignored: true });
    const older = await deliver(
      signed('customer.subscription.updated', sub('sub_b', customer, 'past_due', at, { herald_transactional: '5' }), undefined, at - 1),
    );
    assert.deepEqual(older.body, { received: true, ignored: true });
    assert.equal((await row(p.project.id)).subscription_status, 'active');
    assert.equal((await row(p.project.id)).plan_limit_transactional, 2000);
  });

  test("a late deletion of a replaced subscription leaves the new one's plan; a new subscription replaces a cancelled one", async () => {
    const { p, customer } = await subscriber('Replaced');
    const at = 1_800_000_000;
    // sub_old was cancelled, its deletion reaching Herald after sub_new's creation.
    const created = await deliver(
      signed('customer.subscription.created', sub('sub_new', customer, 'active', at + 50, { herald_transactional: '50000' }), undefined, at + 50),
    );
    assert.deepEqual(created.body, { received: true });
    const lateDelete = await deliver(signed('customer.subscription.deleted', sub('sub_old', customer, 'canceled', at, {}), undefined, at + 60));
    assert.deepEqual(lateDelete.body, { received: true, ignored: true });
    assert.deepEqual(await row(p.project.id), {
      plan: 'pro',
      subscription_status: 'active',
      stripe_subscription_id: 'sub_new',
      plan_limit_transactional: 50000,
      plan_limit_campaigns: null,
    });
    assert.equal((await p.sk.post('/v1/send', { to: 'x@example.com', from: 'hello@sandbox.herald.test', subject: 's', body: 'hi' })).status, 200);

    // Cancelled, then a late update of the replaced sub_old: still no plan.
    await deliver(signed('customer.subscription.deleted', sub('sub_new', customer, 'canceled', at + 50, {}), undefined, at + 500));
    const stale = await deliver(
      signed('customer.subscription.updated', sub('sub_old', customer, 'active', at, { herald_transactional: 'unlimited' }), undefined, at + 40),
    );
    assert.deepEqual(stale.body, { received: true, ignored: true });
    assert.equal((await row(p.project.id)).subscription_status, 'canceled');

    // A subscription made after the cancellation is the project's plan.
    const next = await deliver(
      signed('customer.subscription.created', sub('sub_next', customer, 'active', at + 900, { herald_transactional: '70000' }), undefined, at + 900),
    );
    assert.deepEqual(next.body, { received: true });
    assert.deepEqual(await row(p.project.id), {
      plan: 'pro',
      subscription_status: 'active',
      stripe_subscription_id: 'sub_next',
      plan_limit_transactional: 70000,
      plan_limit_campaigns: null,
    });
  });

  test('a checkout while the subscription is active, trialing or past_due is 409 CONFLICT and creates no session', async () => {
    const { p, api, customer } = await subscriber('Subscribed');
    const at = 1_800_000_000;
    for (const [i, status] of (['active', 'trialing', 'past_due'] as const).entries()) {
      await deliver(signed('customer.subscription.updated', sub('sub_c', customer, status, at, {}), undefined, at + i));
      const sessions = fake.calls.filter((c) => c.path === '/v1/checkout/sessions').length;
      const res = await api.post(`/users/@me/projects/${p.project.id}/checkout`);
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.error.code, 'CONFLICT');
      assert.deepEqual(res.body.error.details, { subscriptionStatus: status });
      assert.match(res.body.error.suggestion, /billing portal/);
      assert.equal(fake.calls.filter((c) => c.path === '/v1/checkout/sessions').length, sessions, 'no checkout session');
    }
    await deliver(signed('customer.subscription.deleted', sub('sub_c', customer, 'canceled', at, {}), undefined, at + 10));
    assert.equal((await api.post(`/users/@me/projects/${p.project.id}/checkout`)).status, 200, 'after the cancellation, a new checkout');
  });
});
