import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { type CampaignStatus, campaigns } from '../../db/schema/campaigns.ts';
import { badRequest, conflict } from '../../http/errors.ts';
import { assertAllowance } from '../billing/limits.ts';
import { senderDomainFor } from '../domains/sender.ts';
import { cancelSending } from './cancel-sending.ts';
import { countRecipientsInTime } from './audience.ts';
import { dropJob, handOver, sendingState } from './chain.ts';
import { CAMPAIGN_QUEUE } from './queue-name.ts';
import type { CampaignRecord } from './schemas.ts';
import { campaignRow, getCampaign } from './service.ts';

export type SendResult = {
  success: true;
  data: { id: string; name: string; status: CampaignStatus; scheduledFor: string | null };
  message: string;
};

/** `scheduledFor` as the platform's date parser reads it; null for an immediate send. */
export function parseScheduledFor(value: string | number | null | undefined, now: Date): Date | null {
  if (value === undefined || value === null) return null;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw badRequest(`scheduledFor '${value}' is not a date`, { scheduledFor: value });
  if (at.getTime() < now.getTime()) {
    throw badRequest(`scheduledFor ${at.toISOString()} is in the past`, { scheduledFor: value, now: now.toISOString() });
  }
  return at;
}

/**
 * POST /campaigns/:id/send. A DRAFT (or SCHEDULED, to move or start it) campaign is scheduled at
 * `scheduledFor` (a delayed engine job, durable across restarts) or starts sending now. The sender
 * domain must still be verified (403) and the audience must not be empty (400).
 */
export async function sendCampaign(ctx: AppContext, projectId: string, id: string, body: { scheduledFor?: string | number | null }): Promise<SendResult> {
  const now = ctx.clock.now();
  const current = await campaignRow(ctx.database.db, projectId, id);
  assertSendable(current.status);
  const scheduledFor = parseScheduledFor(body.scheduledFor, now);
  await senderDomainFor(ctx, projectId, current.fromEmail);
  const total = await countRecipientsInTime(ctx, projectId, current, now);
  if (total === 0) throw badRequest('The campaign has no recipients: its audience has no contact it can be sent to');
  await assertAllowance(ctx, ctx.database.db, projectId, 'campaigns', total);

  const { row, superseded } = await withTransaction(ctx.database, async (t) => {
    const c = await campaignRow(t.tx, projectId, id, { lock: true });
    assertSendable(c.status);
    if (scheduledFor) {
      await t.tx.update(campaigns).set({ status: 'SCHEDULED', scheduledFor, totalRecipients: total, updatedAt: now }).where(eq(campaigns.id, id));
      await handOver(ctx, t, id, scheduledFor);
    } else {
      await t.tx
        .update(campaigns)
        .set({ ...sendingState(now, total), scheduledFor: null })
        .where(eq(campaigns.id, id));
      await handOver(ctx, t, id);
    }
    const [updated] = await t.tx.select().from(campaigns).where(eq(campaigns.id, id));
    return { row: updated, superseded: c.sendJobId };
  });
  await dropJob(ctx, superseded);
  // Sent now: its first job is fetched as it commits, not at the due-queues probe's next tick.
  if (!scheduledFor) ctx.jobs.wake(CAMPAIGN_QUEUE);

  return {
    success: true,
    data: { id: row.id, name: row.name, status: row.status, scheduledFor: row.scheduledFor?.toISOString() ?? null },
    message: scheduledFor ? `Campaign scheduled for ${scheduledFor.toISOString()}` : `Campaign is being sent to ${total} recipient${total === 1 ? '' : 's'}`,
  };
}

function assertSendable(status: CampaignStatus): void {
  if (status !== 'DRAFT' && status !== 'SCHEDULED') {
    throw conflict(`Campaign is ${status}; only DRAFT and SCHEDULED campaigns can be sent`, { status });
  }
}

/**
 * POST /campaigns/:id/cancel. SCHEDULED → DRAFT (schedule removed, editable again); SENDING →
 * CANCELLED: every email not yet handed to a worker is SKIPPED with 'campaign cancelled' in the same
 * transaction, so it is never claimed. Emails already being sent finish. Other states: 409.
 */
export async function cancelCampaign(ctx: AppContext, projectId: string, id: string): Promise<CampaignRecord> {
  const now = ctx.clock.now();
  const superseded = await withTransaction(ctx.database, async ({ tx }) => {
    const c = await campaignRow(tx, projectId, id, { lock: true });
    if (c.status === 'SCHEDULED') {
      await tx.update(campaigns).set({ status: 'DRAFT', scheduledFor: null, sendJobId: null, updatedAt: now }).where(eq(campaigns.id, id));
    } else if (c.status === 'SENDING') {
      await cancelSending(tx, id, 'campaign cancelled', now);
    } else {
      throw conflict(`Campaign is ${c.status}; only SCHEDULED and SENDING campaigns can be cancelled`, { status: c.status });
    }
    return c.sendJobId;
  });
  await dropJob(ctx, superseded);
  return getCampaign(ctx, projectId, id);
}
