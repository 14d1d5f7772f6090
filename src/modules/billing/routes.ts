import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireUser } from '../../http/auth.ts';
import { describe, describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { projectIdParams } from '../projects/schemas.ts';
import { putLimitsBody } from './schemas.ts';
import { createCheckout, createPortal, listInvoices } from './payments.ts';
import { billingConsumption, getBillingLimits, putBillingLimits } from './service.ts';
import { assertBillingEnabled } from './stripe.ts';
import { handlePaymentWebhook } from './webhook.ts';

const categoryLimit = z.object({
  limit: z.number().int().nullable().describe('The cap that binds (null: none): with Stripe billing, the lower of customLimit and planLimit'),
  usage: z.number().int(),
  percentage: z.number().nullable(),
  isWarning: z.boolean(),
  isBlocked: z.boolean(),
  planLimit: z
    .number()
    .int()
    .nullable()
    .optional()
    .describe("With Stripe billing only: the plan's cap (null: the plan sets none); without a live subscription, the free plan's (BILLING_FREE_PLAN_LIMITS)"),
  customLimit: z.number().int().nullable().optional().describe('With Stripe billing only: the cap the project set with PUT (null: none of its own)'),
});
const period = z.object({ start: z.string(), end: z.string() });
const limitsViewSchema = z.object({
  transactional: categoryLimit,
  campaigns: categoryLimit,
  workflows: categoryLimit,
  inbound: categoryLimit,
  period,
});
const consumptionSchema = z.object({ period, usage: z.object({ total: z.number().int(), byCategory: z.record(z.number().int()) }) });
const urlSchema = z.object({ url: z.string() });
const invoicesSchema = z.object({
  data: z.array(
    z
      .object({
        id: z.string(),
        number: z.string().nullable(),
        status: z.string().nullable(),
        amountDue: z.number().int(),
        amountPaid: z.number().int(),
        currency: z.string(),
        createdAt: z.string(),
        hostedInvoiceUrl: z.string().nullable(),
      })
      .passthrough(),
  ),
});
const doc = describer('Billing', 'session');

/** Billing caps and consumption (session cookie; reading needs MEMBER, changing ADMIN — http/roles.ts). */
export function billingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const project = (req: { params: unknown }) => parse(projectIdParams, req.params).id;

  app.get(
    '/users/@me/projects/:id/billing-limits',
    {
      schema: doc({
        operationId: 'billing.limits',
        summary: "Monthly caps and this month's usage per category",
        params: projectIdParams,
        responses: { 200: limitsViewSchema },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req) => {
      project(req);
      return getBillingLimits(ctx, projectOf(req).projectId);
    },
  );

  app.put(
    '/users/@me/projects/:id/billing-limits',
    {
      schema: doc({
        operationId: 'billing.setLimits',
        answeredWhenDiskFull: true,
        summary: "Set monthly caps (null: no cap); with Stripe billing, at most the plan's caps",
        params: projectIdParams,
        body: putLimitsBody,
        responses: { 200: limitsViewSchema },
        errors: [403, 404, 422],
      }),
      onRequest,
    },
    async (req) => {
      project(req);
      return putBillingLimits(ctx, projectOf(req).projectId, parse(putLimitsBody, req.body));
    },
  );

  app.get(
    '/users/@me/projects/:id/billing-consumption',
    {
      schema: doc({
        operationId: 'billing.consumption',
        summary: 'Emails sent this month per category',
        params: projectIdParams,
        responses: { 200: consumptionSchema },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req) => {
      project(req);
      return billingConsumption(ctx, projectOf(req).projectId);
    },
  );
}

/** Stripe: checkout, portal, invoices (404 BILLING_DISABLED without STRIPE_SECRET_KEY) and the payments webhook. */
export function paymentRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const guard = (req: { params: unknown }) => {
    parse(projectIdParams, req.params);
    assertBillingEnabled(ctx.config);
  };

  app.post(
    '/users/@me/projects/:id/checkout',
    {
      schema: doc({
        operationId: 'billing.checkout',
        answeredWhenDiskFull: true,
        summary: 'A Stripe Checkout link',
        params: projectIdParams,
        responses: { 200: urlSchema },
        errors: [403, 404, 409, 502],
      }),
      onRequest,
    },
    async (req) => {
      guard(req);
      return createCheckout(ctx, projectOf(req).projectId, projectOf(req).userId);
    },
  );

  app.post(
    '/users/@me/projects/:id/billing-portal',
    {
      schema: doc({
        operationId: 'billing.portal',
        answeredWhenDiskFull: true,
        summary: 'A Stripe customer portal link',
        params: projectIdParams,
        responses: { 200: urlSchema },
        errors: [403, 404, 502],
      }),
      onRequest,
    },
    async (req) => {
      guard(req);
      return createPortal(ctx, projectOf(req).projectId);
    },
  );

  app.get(
    '/users/@me/projects/:id/billing-invoices',
    {
      schema: doc({
        operationId: 'billing.invoices',
        summary: 'Stripe invoices',
        params: projectIdParams,
        responses: { 200: invoicesSchema },
        errors: [403, 404, 502],
      }),
      onRequest,
    },
    async (req) => {
      guard(req);
      return listInvoices(ctx, projectOf(req).projectId);
    },
  );

  // The signature covers the exact bytes: this route keeps the body as a string.
  void app.register(async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 512 * 1024 }, (_req, body, done) => done(null, body));
    const schema = describe({
      operationId: 'billing.stripeWebhook',
      answeredWhenDiskFull: true,
      summary: 'Stripe events (subscription changes, payments)',
      description: 'Authenticated by the Stripe-Signature header over the raw body, not by a key.',
      tag: 'Billing',
      access: 'none',
      responses: { 200: z.object({ received: z.literal(true), duplicate: z.literal(true).optional(), ignored: z.literal(true).optional() }) },
      errors: [400, 404],
    });
    scope.post('/webhooks/incoming/payments', { schema }, async (req) => {
      assertBillingEnabled(ctx.config);
      const signature = req.headers['stripe-signature'];
      return handlePaymentWebhook(ctx, typeof req.body === 'string' ? req.body : '', typeof signature === 'string' ? signature : undefined);
    });
  });
}
