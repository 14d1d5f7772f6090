import { eq, sql } from 'drizzle-orm';
import type Stripe from 'stripe';
import type { AppContext } from '../../context.ts';
import { type Tx, withTransaction } from '../../db/client.ts';
import { projectBilling } from '../../db/schema/billing.ts';
import { ApiError, badRequest } from '../../http/errors.ts';
import { stripeClient } from './stripe.ts';
import { type SubscriptionEvent, supersedes } from './subscription.ts';

/**
 * POST /webhooks/incoming/payments: Stripe events, verified with the official library against
 * STRIPE_WEBHOOK_SECRET (400 and nothing changed otherwise) and processed once per event id
 * (payment_events, in the same transaction as the change).
 *
 * - customer.subscription.created/updated: plan (the price's lookup key, else its id), status and
 *   the caps named in the price's metadata (`herald_transactional`, `herald_campaigns`,
 *   `herald_workflows`, `herald_inbound`: a whole number, or `unlimited`);
 *   a subscription event older than what is stored, or of another subscription while the stored
 *   one is live, changes nothing (`supersedes`, subscription.ts) and is answered `ignored`;
 * - customer.subscription.deleted: no plan and no plan caps: the project is on the free plan
 *   (BILLING_FREE_PLAN_LIMITS), as every project without a live subscription is (billing/limits.ts).
 *   The plan's caps go to `plan_limit_*`, never to the project's own caps: they are a ceiling
 *   the project cannot lift (billing/limits.ts);
 * - invoice.payment_failed on a renewal: the project is disabled with reason BILLING;
 * - invoice.paid: a project disabled for BILLING is enabled again.
 * Any other type is acknowledged and ignored.
 */

export type WebhookResult = { received: true; duplicate?: true; ignored?: true };

const CAP_KEYS = { transactional: 'herald_transactional', campaigns: 'herald_campaigns', workflows: 'herald_workflows', inbound: 'herald_inbound' } as const;

export async function handlePaymentWebhook(ctx: AppContext, rawBody: string, signature: string | undefined): Promise<WebhookResult> {
  const stripe = await stripeClient(ctx.config);
  const secret = ctx.config.stripe.webhookSecret;
  if (!secret) throw new ApiError(503, 'BILLING_NOT_CONFIGURED', 'STRIPE_WEBHOOK_SECRET is not set on this server');
  if (!signature) throw badRequest('Missing Stripe-Signature header');
  let event: Stripe.Event;
  try {
    event = stripe.webhooks.constructEvent(rawBody, signature, secret);
  } catch {
    throw badRequest('Invalid Stripe signature');
  }
  return withTransaction(ctx.database, async (t) => {
    const { rows } = await t.tx.execute(sql`INSERT INTO payment_events (id, type) VALUES (${event.id}, ${event.type}) ON CONFLICT DO NOTHING RETURNING id`);
    if (rows.length === 0) return { received: true as const, duplicate: true as const };
    switch (event.type) {
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted':
        return (await applySubscription(t, event.data.object, { kind: SUBSCRIPTION_EVENTS[event.type], at: new Date(event.created * 1000) }))
          ? { received: true as const }
          : { received: true as const, ignored: true as const };
      case 'invoice.payment_failed':
        if (event.data.object.billing_reason === 'subscription_cycle') await setBillingDisabled(ctx, t, customerOf(event.data.object.customer), true);
        return { received: true as const };
      case 'invoice.paid':
        await setBillingDisabled(ctx, t, customerOf(event.data.object.customer), false);
        return { received: true as const };
      default:
        return { received: true as const, ignored: true as const };
    }
  });
}

const SUBSCRIPTION_EVENTS = {
  'customer.subscription.created': 'created',
  'customer.subscription.updated': 'updated',
  'customer.subscription.deleted': 'deleted',
} as const;

const customerOf = (c: string | { id: string } | null): string | null => (c === null ? null : typeof c === 'string' ? c : c.id);

function capOf(metadata: Record<string, string> | undefined, key: string): number | null | undefined {
  const v = metadata?.[key];
  if (v === undefined) return undefined;
  if (v === 'unlimited') return null;
  const n = Number(v);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** Applies a subscription event to the customer's project unless it is stale (`supersedes`); false when it changed nothing. */
async function applySubscription(t: Tx, sub: Stripe.Subscription, event: Pick<SubscriptionEvent, 'kind' | 'at'>): Promise<boolean> {
  const customer = customerOf(sub.customer);
  if (!customer) return false;
  // Locked: two events of one customer are compared and applied one after the other.
  const [stored] = await t.tx
    .select({
      projectId: projectBilling.projectId,
      id: projectBilling.stripeSubscriptionId,
      status: projectBilling.subscriptionStatus,
      createdAt: projectBilling.subscriptionCreatedAt,
      eventAt: projectBilling.subscriptionEventAt,
    })
    .from(projectBilling)
    .where(eq(projectBilling.stripeCustomerId, customer))
    .for('update');
  const createdAt = typeof sub.created === 'number' ? new Date(sub.created * 1000) : null;
  if (!stored || !supersedes(stored, { ...event, id: sub.id, createdAt })) return false;
  const deleted = event.kind === 'deleted';
  const price = sub.items.data[0]?.price;
  const caps = {
    planLimitTransactional: deleted ? null : capOf(price?.metadata, CAP_KEYS.transactional),
    planLimitCampaigns: deleted ? null : capOf(price?.metadata, CAP_KEYS.campaigns),
    planLimitWorkflows: deleted ? null : capOf(price?.metadata, CAP_KEYS.workflows),
    planLimitInbound: deleted ? null : capOf(price?.metadata, CAP_KEYS.inbound),
  };
  const set = Object.fromEntries(Object.entries(caps).filter(([, v]) => v !== undefined));
  await t.tx
    .update(projectBilling)
    .set({
      ...set,
      plan: deleted ? null : (price?.lookup_key ?? price?.id ?? null),
      stripeSubscriptionId: sub.id,
      subscriptionStatus: deleted ? 'canceled' : sub.status,
      subscriptionCreatedAt: createdAt,
      subscriptionEventAt: event.at,
      updatedAt: new Date(),
    })
    .where(eq(projectBilling.projectId, stored.projectId));
  return true;
}

async function setBillingDisabled(ctx: AppContext, t: Tx, customer: string | null, disabled: boolean): Promise<void> {
  if (!customer) return;
  const { rows } = await t.tx.execute<{ id: string }>(sql`
    UPDATE projects AS p
       SET disabled = ${disabled}, disabled_reason = ${disabled ? 'BILLING' : null}, updated_at = now()
      FROM project_billing AS b
     WHERE b.stripe_customer_id = ${customer} AND p.id = b.project_id
       AND ${disabled ? sql`NOT p.disabled` : sql`p.disabled AND p.disabled_reason = 'BILLING'`}
     RETURNING p.id`);
  for (const r of rows) await ctx.keys.notifyChanged(r.id, t.client);
}
