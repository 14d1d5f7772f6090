import { desc, eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projectSuspensions } from '../../db/schema/reputation.ts';
import { projectForUser } from '../projects/service.ts';
import { type Assessment, MIN_VOLUME, THRESHOLDS, assess, countsFor } from './rates.ts';

export type Suspension = {
  id: string;
  reason: string;
  bounceRate: { last7Days: number; allTime: number };
  complaintRate: { last7Days: number; allTime: number };
  sentLast7Days: number;
  sentAllTime: number;
  createdAt: string;
};

export type SecurityReport = Assessment & {
  disabled: boolean;
  disabledReason: string | null;
  recentSuspensions: Suspension[];
  thresholds: typeof THRESHOLDS;
  minimumVolume: number;
};

const RECENT_SUSPENSIONS = 10;

/** The project's security state for a member: current rates and levels, whether it is disabled, and past suspensions. 404 for non-members. */
export async function securityReport(ctx: AppContext, userId: string, projectId: string): Promise<SecurityReport> {
  const { project } = await projectForUser(ctx, userId, projectId);
  const assessment = assess(await countsFor(ctx.database.db, projectId, ctx.clock.now()));
  const rows = await ctx.database.db
    .select()
    .from(projectSuspensions)
    .where(eq(projectSuspensions.projectId, projectId))
    .orderBy(desc(projectSuspensions.createdAt))
    .limit(RECENT_SUSPENSIONS);
  return {
    ...assessment,
    disabled: project.disabled,
    disabledReason: project.disabledReason,
    recentSuspensions: rows.map((r) => ({
      id: r.id,
      reason: r.reason,
      bounceRate: { last7Days: r.bounceRate7d, allTime: r.bounceRateAll },
      complaintRate: { last7Days: r.complaintRate7d, allTime: r.complaintRateAll },
      sentLast7Days: r.sentLast7Days,
      sentAllTime: r.sentAllTime,
      createdAt: r.createdAt.toISOString(),
    })),
    thresholds: THRESHOLDS,
    minimumVolume: MIN_VOLUME,
  };
}
