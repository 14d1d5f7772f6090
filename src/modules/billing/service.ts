import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projectBilling } from '../../db/schema/billing.ts';
import { type FieldError, validationError } from '../../http/errors.ts';
import { type Limits, bindingCap, planCapsApply, projectCapSources } from './limits.ts';
import type { CategoryLimit } from './schemas.ts';
import { CATEGORIES, type Category, monthUsage, periodOf } from './usage.ts';

type LimitsView = Record<Category, CategoryLimit> & { period: { start: string; end: string } };

const view = (limit: number | null, usage: number): CategoryLimit => ({
  limit,
  usage,
  percentage: limit === null ? null : limit === 0 ? (usage > 0 ? 100 : 0) : Math.round((usage / limit) * 10_000) / 100,
  isWarning: limit !== null && usage * 100 >= limit * 80,
  isBlocked: limit !== null && usage >= limit,
});

/**
 * Per category: `limit` is the cap that binds. With Stripe on, `planLimit` (the plan's cap: the live
 * subscription's, else the free plan's) and
 * `customLimit` (the project's own, as PUT set it) say where it comes from; without Stripe the
 * view is as it always was, the project's own caps alone.
 */
export async function getBillingLimits(ctx: AppContext, projectId: string): Promise<LimitsView> {
  const now = ctx.clock.now();
  const [caps, usage] = await Promise.all([projectCapSources(ctx.config, ctx.database.db, projectId), monthUsage(ctx.database.db, projectId, now)]);
  const withPlan = planCapsApply(ctx.config);
  const p = periodOf(now);
  const out = { period: { start: p.start.toISOString(), end: p.end.toISOString() } } as LimitsView;
  for (const c of CATEGORIES) {
    const shown = view(bindingCap(ctx.config, caps.own[c], caps.plan[c]), usage[c]);
    out[c] = withPlan ? { ...shown, planLimit: caps.plan[c], customLimit: caps.own[c] } : shown;
  }
  return out;
}

/**
 * With Stripe on, a project's own cap may only be at or below its plan's (null, no cap of its own,
 * leaves the plan's): 422 naming the plan's cap otherwise. A cap above it would be stored but never
 * bind, and the project would read back a `limit` other than the one it set.
 */
async function assertWithinPlan(ctx: AppContext, projectId: string, input: Partial<Limits>): Promise<void> {
  if (!planCapsApply(ctx.config)) return;
  const { plan, free } = await projectCapSources(ctx.config, ctx.database.db, projectId);
  const errors: FieldError[] = [];
  const over: Partial<Limits> = {};
  for (const c of CATEGORIES) {
    const wanted = input[c];
    const ceiling = plan[c];
    if (wanted === undefined || wanted === null || ceiling === null || wanted <= ceiling) continue;
    over[c] = ceiling;
    errors.push({ field: c, code: 'too_big', message: `At most ${ceiling}, the ${free ? 'free ' : ''}plan's monthly ${c} cap` });
  }
  if (errors.length === 0) return;
  throw validationError(errors, {
    details: { planLimits: over },
    suggestion: free
      ? "Set a cap at or below the free plan's, or null to keep it; a higher cap needs a subscription (checkout)"
      : "Set a cap at or below the plan's, or null to keep the plan's; a higher cap needs another plan (billing portal)",
  });
}

/** Sets the given categories (null removes the project's own cap); the others keep theirs. */
export async function putBillingLimits(ctx: AppContext, projectId: string, input: Partial<Limits>): Promise<LimitsView> {
  await assertWithinPlan(ctx, projectId, input);
  const set = {
    ...(input.transactional !== undefined && { limitTransactional: input.transactional }),
    ...(input.campaigns !== undefined && { limitCampaigns: input.campaigns }),
    ...(input.workflows !== undefined && { limitWorkflows: input.workflows }),
    ...(input.inbound !== undefined && { limitInbound: input.inbound }),
  };
  const now = ctx.clock.now();
  await ctx.database.db
    .insert(projectBilling)
    .values({ projectId, ...set, updatedAt: now })
    .onConflictDoUpdate({ target: projectBilling.projectId, set: { ...set, updatedAt: sql`${now.toISOString()}::timestamptz` } });
  return getBillingLimits(ctx, projectId);
}

export async function billingConsumption(ctx: AppContext, projectId: string) {
  const now = ctx.clock.now();
  const usage = await monthUsage(ctx.database.db, projectId, now);
  const p = periodOf(now);
  return {
    period: { start: p.start.toISOString(), end: p.end.toISOString() },
    usage: { total: CATEGORIES.reduce((n, c) => n + usage[c], 0), byCategory: usage },
  };
}
