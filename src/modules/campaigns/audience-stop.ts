import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { cancelSending } from './cancel-sending.ts';

/**
 * A campaign whose audience the worker cannot read (its statement passed the condition bound, or
 * its rule no longer compiles) stops instead of being retried: a retry would cost the same
 * PostgreSQL time again, for every tenant's campaigns waiting on the same two workers.
 *
 * - SCHEDULED, at its start: back to DRAFT with the schedule removed, as a cancel does (nothing was
 *   sent). Sending it again answers 400 on `audience` with the same reason while it stays too slow.
 * - SENDING, at a fan-out batch: CANCELLED (cancel-sending.ts), the reason on its skipped emails
 *   (visible on GET /emails).
 */

/** SCHEDULED → DRAFT, in the caller's transaction (which holds the campaign row lock). */
export async function unscheduleForAudience(ctx: AppContext, tx: Db, campaign: { id: string; projectId: string }, reason: string): Promise<void> {
  const now = ctx.clock.now();
  await tx.update(campaigns).set({ status: 'DRAFT', scheduledFor: null, sendJobId: null, updatedAt: now }).where(eq(campaigns.id, campaign.id));
  ctx.log.warn({ campaignId: campaign.id, projectId: campaign.projectId, reason }, 'scheduled campaign not started: its audience could not be read');
}

/** SENDING → CANCELLED, if `jobId` is still the campaign's live job. */
export async function stopSendingForAudience(ctx: AppContext, campaignId: string, jobId: string, reason: string): Promise<void> {
  const now = ctx.clock.now();
  const stopped = await withTransaction(ctx.database, async ({ tx }) => {
    const [c] = await tx
      .select({ status: campaigns.status, sendJobId: campaigns.sendJobId, projectId: campaigns.projectId })
      .from(campaigns)
      .where(eq(campaigns.id, campaignId))
      .for('update');
    if (!c || c.status !== 'SENDING' || c.sendJobId !== jobId) return null;
    await cancelSending(tx, campaignId, `campaign stopped: ${reason}`, now);
    return c;
  });
  if (stopped) ctx.log.warn({ campaignId, projectId: stopped.projectId, reason }, 'campaign stopped: its audience could not be read');
}
