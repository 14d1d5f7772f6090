import { sql } from 'drizzle-orm';
import { integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

/**
 * A project's monthly sending caps per category (null = unlimited) and, when Stripe is configured,
 * its customer, subscription and plan. A project without a row has no caps and no subscription.
 * `limit_*` are the caps the project sets itself (PUT billing-limits); `plan_limit_*` are the
 * plan's, written only by the payments webhook. With Stripe on, the lower of the two binds
 * (billing/limits.ts); without it, only `limit_*`.
 */
export const projectBilling = pgTable('project_billing', {
  projectId: text('project_id')
    .primaryKey()
    .references(() => projects.id, { onDelete: 'cascade' }),
  limitTransactional: integer('limit_transactional'),
  limitCampaigns: integer('limit_campaigns'),
  limitWorkflows: integer('limit_workflows'),
  limitInbound: integer('limit_inbound'),
  planLimitTransactional: integer('plan_limit_transactional'),
  planLimitCampaigns: integer('plan_limit_campaigns'),
  planLimitWorkflows: integer('plan_limit_workflows'),
  planLimitInbound: integer('plan_limit_inbound'),
  plan: text('plan'),
  stripeCustomerId: text('stripe_customer_id'),
  stripeSubscriptionId: text('stripe_subscription_id'),
  subscriptionStatus: text('subscription_status'),
  /**
   * The stored subscription's own `created` time and the `created` time of the last subscription
   * event applied: Stripe does not deliver events in order (billing/webhook.ts `supersedes`).
   */
  subscriptionCreatedAt: timestamp('subscription_created_at', { withTimezone: true, mode: 'date' }),
  subscriptionEventAt: timestamp('subscription_event_at', { withTimezone: true, mode: 'date' }),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/** Warning emails sent (80 % and 100 %), at most one per project, category, month and level. */
export const billingWarnings = pgTable(
  'billing_warnings',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    category: text('category').notNull(),
    /** `YYYY-MM` (UTC). */
    period: text('period').notNull(),
    level: integer('level').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.category, t.period, t.level] })],
);

/** Payment-provider webhook events already processed, by the provider's event id (replays are ignored). */
export const paymentEvents = pgTable('payment_events', {
  id: text('id').primaryKey(),
  type: text('type').notNull(),
  receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/**
 * Emails of the current month that a reset deleted: usage keeps counting them, so wiping the
 * project's data never restores a category's allowance.
 */
export const billingUsageCarry = pgTable(
  'billing_usage_carry',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    period: text('period').notNull(),
    category: text('category').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.period, t.category] })],
);

/**
 * The month's counted emails per category created before `counted_before`, so that a capped send
 * counts only the emails since then (billing/usage.ts). `waiting` holds the emails created before
 * `counted_before` that were still waiting for delivery when it last moved: they are not in the
 * counts (delivery may still refuse them) and are looked up by id until they settle.
 */
export const billingUsageSnapshots = pgTable(
  'billing_usage_snapshots',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    /** `YYYY-MM` (UTC). */
    period: text('period').notNull(),
    countedBefore: timestamp('counted_before', { withTimezone: true, mode: 'date' }).notNull(),
    transactional: integer('transactional').notNull().default(0),
    campaigns: integer('campaigns').notNull().default(0),
    workflows: integer('workflows').notNull().default(0),
    waiting: uuid('waiting')
      .array()
      .notNull()
      .default(sql`'{}'::uuid[]`),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.period] })],
);
