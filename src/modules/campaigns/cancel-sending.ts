import { eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { skipQueuedOfCampaign } from '../emails/lifecycle.ts';

/**
 * SENDING → CANCELLED, in the caller's transaction (which holds the campaign row lock), for a
 * user's cancel and every stop the platform makes (an audience it cannot read, a disabled project,
 * the month's campaigns allowance): the emails still QUEUED are SKIPPED with `reason` as their
 * `error`, so no worker claims them; emails already with the relay finish; `totalRecipients`
 * becomes the number of emails written, as after a finish (sent + skipped).
 */
export async function cancelSending(tx: Db, campaignId: string, reason: string, now: Date): Promise<void> {
  await skipQueuedOfCampaign(tx, campaignId, reason, now);
  await tx
    .update(campaigns)
    .set({
      status: 'CANCELLED',
      cancelledAt: now,
      completedAt: now,
      sendJobId: null,
      pendingCount: 0,
      totalRecipients: sql`(SELECT count(*)::int FROM emails AS e WHERE e.campaign_id = ${campaignId})`,
      updatedAt: now,
    })
    .where(eq(campaigns.id, campaignId));
}
