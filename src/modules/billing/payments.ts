import { eq, sql } from 'drizzle-orm';
import type Stripe from 'stripe';
import type { AppContext } from '../../context.ts';

import { projectBilling } from '../../db/schema/billing.ts';
import { users } from '../../db/schema/users.ts';
import { ApiError, badRequest } from '../../http/errors.ts';
import { stripeClient } from './stripe.ts';
import { isLive } from './subscription.ts';

/** Stripe checkout, billing portal and invoices of a project (only with STRIPE_SECRET_KEY). */

async function billingRow(ctx: AppContext, projectId: string) {
  const [row] = await ctx.database.db.select().from(projectBilling).where(eq(projectBilling.projectId, projectId));
  return row ?? null;
}

/** The project's Stripe customer, created on first checkout (metadata names the project). */
async function ensureCustomer(ctx: AppContext, stripe: Stripe, projectId: string, userId: string | null): Promise<string> {
  const existing = await billingRow(ctx, projectId);
  if (existing?.stripeCustomerId) return existing.stripeCustomerId;
  const [user] = userId ? await ctx.database.db.select({ email: users.email }).from(users).where(eq(users.id, userId)) : [];
  const customer = await stripe.customers.create({ email: user?.email, metadata: { projectId } }, { idempotencyKey: `herald-customer-${projectId}` });
  await ctx.database.db
    .insert(projectBilling)
    .values({ projectId, stripeCustomerId: customer.id })
    .onConflictDoUpdate({ target: projectBilling.projectId, set: { stripeCustomerId: sql`coalesce(${projectBilling.stripeCustomerId}, ${customer.id})` } });
  return (await billingRow(ctx, projectId))!.stripeCustomerId!;
}

const dashboardUrl = (ctx: AppContext, projectId: string, state: string) =>
  `${ctx.config.publicUrl}/billing?project=${encodeURIComponent(projectId)}&checkout=${state}`;

/**
 * A Checkout session for STRIPE_PRICE_ID; 409 while the project's subscription is live: a second
 * checkout would make a second subscription, billed beside the first (plan changes go through the portal).
 * A session of the customer still open for the same price is answered again instead of a new one:
 * two open sessions, both paid, were two subscriptions.
 */
export async function createCheckout(ctx: AppContext, projectId: string, userId: string | null): Promise<{ url: string }> {
  const stripe = await stripeClient(ctx.config);
  const price = ctx.config.stripe.priceId;
  if (!price) throw new ApiError(503, 'BILLING_NOT_CONFIGURED', 'STRIPE_PRICE_ID is not set on this server');
  const status = (await billingRow(ctx, projectId))?.subscriptionStatus ?? null;
  if (isLive(status)) {
    throw new ApiError(409, 'CONFLICT', `This project already has a subscription (${status})`, {
      details: { subscriptionStatus: status },
      suggestion: 'Change or cancel the plan in the billing portal (POST /users/@me/projects/:id/billing-portal)',
    });
  }
  const customer = await ensureCustomer(ctx, stripe, projectId, userId);
  const open = await stripe.checkout.sessions.list({ customer, status: 'open', limit: 10 });
  const reusable = open.data.find((s) => s.mode === 'subscription' && s.metadata?.heraldPrice === price && s.url);
  if (reusable?.url) return { url: reusable.url };
  const session = await stripe.checkout.sessions.create({
    mode: 'subscription',
    customer,
    client_reference_id: projectId,
    line_items: [{ price, quantity: 1 }],
    metadata: { projectId, heraldPrice: price },
    subscription_data: { metadata: { projectId } },
    success_url: dashboardUrl(ctx, projectId, 'success'),
    cancel_url: dashboardUrl(ctx, projectId, 'cancelled'),
  });
  if (!session.url) throw new ApiError(502, 'BILLING_PROVIDER_ERROR', 'The payment provider returned no checkout URL');
  return { url: session.url };
}

export async function createPortal(ctx: AppContext, projectId: string): Promise<{ url: string }> {
  const stripe = await stripeClient(ctx.config);
  const row = await billingRow(ctx, projectId);
  if (!row?.stripeCustomerId) throw badRequest('This project has no billing account yet; start a checkout first');
  const session = await stripe.billingPortal.sessions.create({ customer: row.stripeCustomerId, return_url: dashboardUrl(ctx, projectId, 'portal') });
  return { url: session.url };
}

export type InvoiceRecord = {
  id: string;
  number: string | null;
  status: string | null;
  amountDue: number;
  amountPaid: number;
  currency: string;
  createdAt: string;
  hostedInvoiceUrl: string | null;
  pdfUrl: string | null;
};

export async function listInvoices(ctx: AppContext, projectId: string): Promise<{ data: InvoiceRecord[] }> {
  const stripe = await stripeClient(ctx.config);
  const row = await billingRow(ctx, projectId);
  if (!row?.stripeCustomerId) return { data: [] };
  const list = await stripe.invoices.list({ customer: row.stripeCustomerId, limit: 24 });
  return {
    data: list.data.map((i) => ({
      id: i.id ?? '',
      number: i.number ?? null,
      status: i.status ?? null,
      amountDue: i.amount_due,
      amountPaid: i.amount_paid,
      currency: i.currency,
      createdAt: new Date(i.created * 1000).toISOString(),
      hostedInvoiceUrl: i.hosted_invoice_url ?? null,
      pdfUrl: i.invoice_pdf ?? null,
    })),
  };
}
