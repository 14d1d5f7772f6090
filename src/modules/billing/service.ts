import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projectBilling } from '../../db/schema/billing.ts';
import { type Limits, projectLimits } from './limits.ts';
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

export async function getBillingLimits(ctx: AppContext, projectId: string): Promise<LimitsView> {
  const now = ctx.clock.now();
  const [limits, usage] = await Promise.all([projectLimits(ctx.database.db, projectId), monthUsage(ctx.database.db, projectId, now)]);
  const p = periodOf(now);
  const out = { period: { start: p.start.toISOString(), end: p.end.toISOString() } } as LimitsView;
  for (const c of CATEGORIES) out[c] = view(limits[c], usage[c]);
  return out;
}

/** Sets the given categories (null removes a cap); the others keep theirs. */
export async function putBillingLimits(ctx: AppContext, projectId: string, input: Partial<Limits>): Promise<LimitsView> {
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
