import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { projects } from '../../db/schema/users.ts';
import { cancelSending } from './cancel-sending.ts';
import { type AudienceSpeed, countRecipients, readAudienceInTime } from './audience.ts';
import { unscheduleForAudience } from './audience-stop.ts';
import { handOver, sendingState } from './chain.ts';
import { type FanoutStep, fanOutBatch } from './fanout.ts';
import { finalise } from './finalise.ts';
import { watchProgress } from './recovery.ts';
import { CAMPAIGN_QUEUE } from './queue-name.ts';
import { nextTurnAt } from './turns.ts';

/**
 * The campaign engine: schedule → fan out → finalise, one `campaign-send` job at a time per
 * campaign (chain.ts). Each job starts a due scheduled campaign, writes batches for up to
 * TICK_BUDGET_MS, checks for completion and stalls, and hands over to its successor. Audience reads
 * take turns per project, and slow ones share a slow lane (turns.ts): a job that finds its turn or
 * the lanes taken ends without work. `speed` comes from the predecessor and goes to the successor.
 */

const TICK_BUDGET_MS = 5_000;
const NEXT_TICK_MS = 1_000;

export async function runCampaignJob(ctx: AppContext, campaignId: string, jobId: string, speed: AudienceSpeed): Promise<void> {
  const [row] = await ctx.database.db
    .select({ status: campaigns.status, sendJobId: campaigns.sendJobId, projectId: campaigns.projectId, projectDisabled: projects.disabled })
    .from(campaigns)
    .innerJoin(projects, eq(projects.id, campaigns.projectId))
    .where(eq(campaigns.id, campaignId));
  if (!row || row.sendJobId !== jobId) return;
  if (row.projectDisabled) return stopForDisabledProject(ctx, campaignId, jobId);
  if (row.status === 'SCHEDULED') {
    if (!(await startScheduled(ctx, campaignId, jobId, speed))) return;
  } else if (row.status !== 'SENDING') {
    return;
  }

  const deadline = Date.now() + TICK_BUDGET_MS;
  let step: FanoutStep = 'more';
  while (step === 'more' && Date.now() < deadline) step = await fanOutBatch(ctx, campaignId, jobId, speed);
  if (step === 'stale' || step === 'stopped') return;
  if (step === 'done' && (await finalise(ctx, campaignId, jobId))) return;
  await watchProgress(ctx, campaignId, jobId);
  await continueLater(ctx, campaignId, jobId, await nextTickAt(ctx, step, row.projectId), speed);
}

/** When the successor job starts: at once after a full batch, a little later when the project's turn or the slow lanes were taken (turns.ts), else in a second. */
async function nextTickAt(ctx: AppContext, step: FanoutStep, projectId: string): Promise<Date | undefined> {
  if (step === 'more') return undefined;
  if (step === 'busy') return nextTurnAt(ctx.database.db, projectId);
  return new Date(Date.now() + NEXT_TICK_MS);
}

type CampaignRow = typeof campaigns.$inferSelect;

const isLiveSchedule = (c: CampaignRow | undefined, jobId: string): c is CampaignRow => !!c && c.status === 'SCHEDULED' && c.sendJobId === jobId;

/** Its time has come (a job may fire up to a second early). */
const isDue = (c: CampaignRow, now: Date) => !c.scheduledFor || c.scheduledFor.getTime() <= now.getTime() + 1000;

/**
 * SCHEDULED → SENDING when the scheduled time has come (a job that fires early re-arms itself).
 * The audience is counted before the row is locked, under the condition bound (audience.ts
 * readAudienceInTime): a slow audience used to be counted for as long as it took with the row
 * locked, holding both campaign workers, and the watchdog and cancels behind them.
 */
async function startScheduled(ctx: AppContext, campaignId: string, jobId: string, speed: AudienceSpeed): Promise<boolean> {
  const now = ctx.clock.now();
  const [seen] = await ctx.database.db.select().from(campaigns).where(eq(campaigns.id, campaignId));
  if (!isLiveSchedule(seen, jobId)) return false;
  const counted = isDue(seen, now) ? await readAudienceInTime(ctx, seen.projectId, speed, (db) => countRecipients(db, seen.projectId, seen, now)) : null;
  return withTransaction(ctx.database, async (t) => {
    const [c] = await t.tx.select().from(campaigns).where(eq(campaigns.id, campaignId)).for('update');
    if (!isLiveSchedule(c, jobId)) return false;
    if (!isDue(c, now)) {
      await handOver(ctx, t, campaignId, c.scheduledFor!);
      return false;
    }
    if (counted && 'busy' in counted) {
      // Another audience read of the project holds its turn, or the slow lanes are taken (turns.ts): count again in a successor job.
      await handOver(ctx, t, campaignId, await nextTurnAt(t.tx, c.projectId), speed.slow);
      return false;
    }
    if (!counted || c.updatedAt.getTime() !== seen.updatedAt.getTime()) {
      // Edited (PUT keeps the schedule) while it was counted: count again, in a successor job.
      await handOver(ctx, t, campaignId);
      return false;
    }
    if ('unreadable' in counted) {
      await unscheduleForAudience(ctx, t.tx, c, counted.unreadable);
      return false;
    }
    if (counted.value === 0) {
      // The audience emptied since it was scheduled: nothing to send.
      await t.tx
        .update(campaigns)
        .set({ status: 'SENT', sentAt: now, completedAt: now, totalRecipients: 0, sendJobId: null, updatedAt: now })
        .where(eq(campaigns.id, campaignId));
      return false;
    }
    await t.tx.update(campaigns).set(sendingState(now, counted.value)).where(eq(campaigns.id, campaignId));
    return true;
  });
}

/**
 * A disabled project sends nothing (decisions.md § 10: its pending sends are cancelled): a
 * scheduled campaign goes back to DRAFT, a sending one ends CANCELLED with its waiting emails SKIPPED.
 */
async function stopForDisabledProject(ctx: AppContext, campaignId: string, jobId: string): Promise<void> {
  const now = ctx.clock.now();
  await withTransaction(ctx.database, async ({ tx }) => {
    const [c] = await tx.select().from(campaigns).where(eq(campaigns.id, campaignId)).for('update');
    if (!c || c.sendJobId !== jobId) return;
    if (c.status === 'SCHEDULED') {
      await tx.update(campaigns).set({ status: 'DRAFT', scheduledFor: null, sendJobId: null, updatedAt: now }).where(eq(campaigns.id, campaignId));
    } else if (c.status === 'SENDING') {
      await cancelSending(tx, campaignId, 'campaign cancelled: the project is disabled', now);
    }
  });
  ctx.log.warn({ campaignId }, 'campaign stopped: its project is disabled');
}

async function continueLater(ctx: AppContext, campaignId: string, jobId: string, startAfter: Date | undefined, speed: AudienceSpeed): Promise<void> {
  const handedOver = await withTransaction(ctx.database, async (t) => {
    const [c] = await t.tx
      .select({ status: campaigns.status, sendJobId: campaigns.sendJobId })
      .from(campaigns)
      .where(eq(campaigns.id, campaignId))
      .for('update');
    if (!c || c.status !== 'SENDING' || c.sendJobId !== jobId) return false;
    await handOver(ctx, t, campaignId, startAfter, speed.slow);
    return true;
  });
  // A successor due at once (after a full batch) is fetched as it commits, not at the probe's next tick.
  if (handedOver && !startAfter) ctx.jobs.wake(CAMPAIGN_QUEUE);
}
