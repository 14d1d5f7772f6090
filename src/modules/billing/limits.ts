import { eq } from 'drizzle-orm';
import { lockKey } from '../../db/key-lock.ts';
import type { Config } from '../../config.ts';
import type { AppContext } from '../../context.ts';
import { type Db, type Tx, withTransaction } from '../../db/client.ts';
import { projectBilling } from '../../db/schema/billing.ts';
import { ApiError } from '../../http/errors.ts';
import { loggableError } from '../../loggable-error.ts';
import { isLive } from './subscription.ts';
import { queueLimitWarnings } from './warnings.ts';
import { CATEGORIES, type Category, foldUsageSnapshot, monthUsage, periodOf, usageForCap } from './usage.ts';

/**
 * Monthly billing caps (decisions.md § 10). Every path that writes project mail calls
 * `assertWithinBillingLimit` inside the transaction that writes it, before writing anything:
 * /v1/send (transactional), each campaign batch (campaigns), the workflow SEND_EMAIL step
 * (workflows). Campaigns also call `assertAllowance` at send/schedule time for the whole audience.
 * With Stripe on, a project's cap is the lower of its own and its plan's: the plan's is a ceiling
 * the project cannot lift (PUT billing-limits refuses a cap above it, service.ts). A project without
 * a live subscription (none yet, cancelled, incomplete, unpaid) is on the free plan, whose caps are
 * BILLING_FREE_PLAN_LIMITS (0 each by default): `planCap`, the one rule.
 */

export type Limits = Record<Category, number | null>;
/**
 * Where a project's caps come from: its own (PUT billing-limits) and its plan's: its live Stripe
 * subscription's (the payments webhook), else the free plan's.
 */
export type CapSources = { own: Limits; plan: Limits; free: boolean };

const OWN_COLUMN = {
  transactional: projectBilling.limitTransactional,
  campaigns: projectBilling.limitCampaigns,
  workflows: projectBilling.limitWorkflows,
  inbound: projectBilling.limitInbound,
} as const;
const PLAN_COLUMN = {
  transactional: projectBilling.planLimitTransactional,
  campaigns: projectBilling.planLimitCampaigns,
  workflows: projectBilling.planLimitWorkflows,
  inbound: projectBilling.planLimitInbound,
} as const;

/**
 * The plan's caps bind only while Stripe is on: a self-hosted server without it (or one that turned
 * it off) is capped by the projects' own caps alone, whatever a past plan left in the row.
 */
export const planCapsApply = (config: Config): boolean => Boolean(config.stripeSecretKey);

/** The plan's cap of a category: the live subscription's (null: none), else the free plan's. */
const planCap = (config: Config, status: string | null, subscribed: number | null, category: Category): number | null =>
  isLive(status) ? subscribed : config.billingFreePlanLimits[category];

/**
 * The cap that binds (null = none): with Stripe on, the lower of the project's own and its plan's
 * (a missing one not capping); without, the project's own.
 */
export const bindingCap = (config: Config, own: number | null, plan: number | null): number | null =>
  !planCapsApply(config) || plan === null ? own : own === null ? plan : Math.min(own, plan);

const noCaps = (): Limits => ({ transactional: null, campaigns: null, workflows: null, inbound: null });

export async function projectCapSources(config: Config, db: Db, projectId: string): Promise<CapSources> {
  const [row] = await db.select().from(projectBilling).where(eq(projectBilling.projectId, projectId));
  const status = row?.subscriptionStatus ?? null;
  const own = row
    ? { transactional: row.limitTransactional, campaigns: row.limitCampaigns, workflows: row.limitWorkflows, inbound: row.limitInbound }
    : noCaps();
  const subscribed = row
    ? { transactional: row.planLimitTransactional, campaigns: row.planLimitCampaigns, workflows: row.planLimitWorkflows, inbound: row.planLimitInbound }
    : noCaps();
  const plan = noCaps();
  for (const c of CATEGORIES) plan[c] = planCap(config, status, subscribed[c], c);
  return { own, plan, free: !isLive(status) };
}

/** The caps that bind per category (the plan's count only while Stripe is on). */
export async function projectLimits(ctx: AppContext, db: Db, projectId: string): Promise<Limits> {
  const { own, plan } = await projectCapSources(ctx.config, db, projectId);
  const out = noCaps();
  for (const c of CATEGORIES) out[c] = bindingCap(ctx.config, own[c], plan[c]);
  return out;
}

/** Whose cap stopped a send: the project's own, its subscription's plan, or the free plan. */
export type CapOwner = 'own' | 'plan' | 'free';

/** One category's binding cap, and whose it is (one primary-key read). */
async function categoryLimit(ctx: AppContext, db: Db, projectId: string, category: Category): Promise<{ limit: number | null; by: CapOwner }> {
  const [row] = await db
    .select({ own: OWN_COLUMN[category], plan: PLAN_COLUMN[category], status: projectBilling.subscriptionStatus })
    .from(projectBilling)
    .where(eq(projectBilling.projectId, projectId));
  const own = row?.own ?? null;
  const status = row?.status ?? null;
  const plan = planCap(ctx.config, status, row?.plan ?? null, category);
  const limit = bindingCap(ctx.config, own, plan);
  return { limit, by: limit === null || limit === own || !planCapsApply(ctx.config) ? 'own' : isLive(status) ? 'plan' : 'free' };
}

const SUGGESTIONS: Record<CapOwner, string> = {
  own: 'Raise the limit in the billing settings or wait for the next month',
  plan: "This is the plan's cap: change the plan in the billing portal or wait for the next month",
  free: "This is the free plan's cap (the project has no active subscription): subscribe with a checkout or wait for the next month",
};

export const limitExceeded = (category: Category, limit: number, usage: number, requested: number, by: CapOwner = 'own') =>
  new ApiError(
    403,
    'BILLING_LIMIT_EXCEEDED',
    `This would exceed the project's monthly ${category} limit (${usage} of ${limit} used, ${requested} more requested)`,
    {
      details: { category, limit, usage, requested, remaining: Math.max(0, limit - usage) },
      suggestion: SUGGESTIONS[by],
    },
  );

/**
 * Throws 403 BILLING_LIMIT_EXCEEDED when `count` more emails of `category` would take the project
 * past its cap this month; otherwise returns, and queues the 80 %/100 % warning emails the new
 * usage reaches (once per category per month). Call it first in the transaction that writes the
 * emails: it serialises writers of the same project and category (a transaction-scoped advisory
 * lock), so two concurrent sends cannot both take the last slot. No cap: one primary-key read.
 * With a cap, the usage is read from the month's snapshot plus the emails since it (usage.ts), and
 * the snapshot is folded forward here once enough emails lie behind it.
 */
export async function assertWithinBillingLimit(ctx: AppContext, t: Tx, projectId: string, category: Category, count: number): Promise<void> {
  if (count <= 0) return;
  const { limit, by } = await categoryLimit(ctx, t.tx, projectId, category);
  if (limit === null) return;
  await lockKey(t.tx, `billing:${projectId}:${category}`);
  const now = ctx.clock.now();
  const { usage, foldDue } = await usageForCap(t.tx, projectId, now, category);
  if (usage + count > limit) {
    // The caller's transaction rolls back: a fold in it would be lost, and refused sends would keep counting.
    if (foldDue) foldSoon(ctx, projectId, now);
    throw limitExceeded(category, limit, usage, count, by);
  }
  // Under the lock, so the next check of this category counts only the emails since the fold.
  if (foldDue) await foldUsageSnapshot(t.tx, projectId, now);
  await queueLimitWarnings(ctx, t, { projectId, category, limit, usage: usage + count, period: periodOf(now) });
}

const foldsInFlight = new WeakMap<AppContext, Set<string>>();

/**
 * Folds the project's usage snapshot in a transaction of its own, not awaited: the caller holds a
 * pool connection, and waiting for a second one could exhaust the pool. One at a time per project.
 */
function foldSoon(ctx: AppContext, projectId: string, now: Date): void {
  let inFlight = foldsInFlight.get(ctx);
  if (!inFlight) foldsInFlight.set(ctx, (inFlight = new Set()));
  if (inFlight.has(projectId)) return;
  const running = inFlight.add(projectId);
  withTransaction(ctx.database, (t) => foldUsageSnapshot(t.tx, projectId, now))
    .catch((err: unknown) => ctx.log.warn({ error: loggableError(err), projectId }, 'folding the billing usage snapshot failed'))
    .finally(() => running.delete(projectId));
}

/** As assertWithinBillingLimit, answering false instead of throwing (for engines that stop rather than fail). */
export async function withinBillingLimit(ctx: AppContext, t: Tx, projectId: string, category: Category, count: number): Promise<boolean> {
  try {
    await assertWithinBillingLimit(ctx, t, projectId, category, count);
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'BILLING_LIMIT_EXCEEDED') return false;
    throw err;
  }
}

/** The check alone, for a campaign's whole audience at send/schedule time (nothing is written then). */
export async function assertAllowance(ctx: AppContext, db: Db, projectId: string, category: Category, count: number): Promise<void> {
  const { limit, by } = await categoryLimit(ctx, db, projectId, category);
  if (limit === null) return;
  const usage = (await monthUsage(db, projectId, ctx.clock.now(), category))[category];
  if (usage + count > limit) throw limitExceeded(category, limit, usage, count, by);
}
