import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { projectSuspensions } from '../../db/schema/reputation.ts';
import { projects } from '../../db/schema/users.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { failQueuedOfProject } from '../emails/lifecycle.ts';
import { type Assessment, WINDOW_DAYS, assess, countsFor } from './rates.ts';

export const REPUTATION_REASON = 'EMAIL_REPUTATION';
export const STOPPED_ERROR = 'Not sent: the project was disabled because its bounce or complaint rate is too high (EMAIL_REPUTATION)';

/**
 * The reputation guard (decisions.md § 10): a critical bounce or complaint rate disables the
 * project at once (API keys see it through the key cache notification) and fails its QUEUED
 * emails. Runs after every hard bounce and complaint, and hourly for recently active projects
 * (a rate can cross a threshold without a new bounce once the volume reaches the minimum).
 */
export async function evaluateReputation(ctx: AppContext, projectId: string): Promise<Assessment> {
  const assessment = assess(await countsFor(ctx.database.db, projectId, ctx.clock.now()));
  if (assessment.status === 'critical') await suspendForReputation(ctx, projectId, assessment);
  return assessment;
}

/** Disables the project (once) and stops its queued sends. True when this call disabled it. */
export async function suspendForReputation(ctx: AppContext, projectId: string, a: Assessment): Promise<boolean> {
  const now = ctx.clock.now();
  const stopped = await withTransaction(ctx.database, async ({ tx, client }) => {
    const changed = await tx
      .update(projects)
      .set({ disabled: true, disabledReason: REPUTATION_REASON, updatedAt: now })
      .where(and(eq(projects.id, projectId), eq(projects.disabled, false)))
      .returning({ id: projects.id });
    if (changed.length === 0) return null;
    await tx.insert(projectSuspensions).values({
      id: uuidv7(now.getTime()),
      projectId,
      reason: REPUTATION_REASON,
      bounceRate7d: a.bounceRate.last7Days,
      bounceRateAll: a.bounceRate.allTime,
      complaintRate7d: a.complaintRate.last7Days,
      complaintRateAll: a.complaintRate.allTime,
      sentLast7Days: a.sentLast7Days,
      sentAllTime: a.sentAllTime,
      createdAt: now,
    });
    const failed = await failQueuedOfProject(tx, projectId, STOPPED_ERROR, now);
    await ctx.keys.notifyChanged(projectId, client);
    return failed;
  });
  if (stopped === null) return false;
  ctx.log.warn({ projectId, bounceRate: a.bounceRate, complaintRate: a.complaintRate, stoppedEmails: stopped }, 'project disabled: email reputation');
  return true;
}

/** Why the delivery worker must not send for this project now (it is disabled), or null. */
export async function sendingBlocked(ctx: AppContext, projectId: string): Promise<string | null> {
  const [row] = await ctx.database.db.select({ disabled: projects.disabled, reason: projects.disabledReason }).from(projects).where(eq(projects.id, projectId));
  if (!row) return 'The project no longer exists';
  if (!row.disabled) return null;
  return row.reason === REPUTATION_REASON ? STOPPED_ERROR : `Not sent: the project is disabled (${row.reason ?? 'disabled'})`;
}

/** The periodic pass: every enabled project that created email in the window. */
export async function evaluateActiveProjects(ctx: AppContext): Promise<void> {
  const since = new Date(ctx.clock.now().getTime() - WINDOW_DAYS * 86_400_000).toISOString();
  const rows = await ctx.database.db
    .select({ id: projects.id })
    .from(projects)
    .where(
      and(eq(projects.disabled, false), sql`EXISTS (SELECT 1 FROM emails e WHERE e.project_id = ${projects.id} AND e.created_at > ${since}::timestamptz)`),
    );
  for (const { id } of rows) {
    await evaluateReputation(ctx, id).catch((err) => ctx.log.error({ err, projectId: id }, 'reputation check failed'));
  }
}

const empty = z.object({}).passthrough();

export const reputationQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'reputation-check',
  schema: empty,
  cron: '23 * * * *',
  retryLimit: 1,
  expireInSeconds: 30 * 60,
  handler: (ctx) => evaluateActiveProjects(ctx),
};
