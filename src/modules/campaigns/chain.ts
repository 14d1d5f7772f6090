import { eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { CAMPAIGN_QUEUE } from './queue-name.ts';

/**
 * The engine runs as a chain of `campaign-send` jobs, one at a time per campaign: each job does a
 * bounded amount of work and enqueues its successor. The row names the one live job (`send_job_id`);
 * a job that finds another id there is stale (superseded, rescheduled, cancelled) and does nothing.
 * Every hand-over happens in the transaction that holds the campaign row lock. `slowAudience` tells
 * the successor to read the audience in a slow lane directly (turns.ts).
 */
export async function handOver(ctx: AppContext, t: Tx, campaignId: string, startAfter?: Date, slowAudience = false): Promise<string> {
  const data = slowAudience ? { campaignId, slowAudience } : { campaignId };
  const jobId = await ctx.jobs.send(CAMPAIGN_QUEUE, data, { client: t.client, startAfter });
  if (!jobId) throw new Error(`could not enqueue ${CAMPAIGN_QUEUE} for campaign ${campaignId}`);
  await t.tx
    .update(campaigns)
    .set({ sendJobId: jobId, heartbeatAt: sql`now()` })
    .where(eq(campaigns.id, campaignId));
  return jobId;
}

/** The columns that start a send: SENDING from the first contact on. */
export function sendingState(now: Date, totalRecipients: number) {
  return {
    status: 'SENDING' as const,
    sentAt: now,
    totalRecipients,
    fanoutCursorAt: null,
    fanoutCursorId: null,
    fanoutDone: false,
    pendingCount: 0,
    progressAt: sql`now()`,
    heartbeatAt: sql`now()`,
    completedAt: null,
    updatedAt: now,
  };
}

/** Cancels a superseded job in pg-boss (best effort: the job would find itself stale anyway). */
export async function dropJob(ctx: AppContext, jobId: string | null): Promise<void> {
  if (!jobId) return;
  await ctx.jobs.cancel(CAMPAIGN_QUEUE, jobId).catch((err: unknown) => ctx.log.warn({ err, jobId }, 'could not cancel a campaign job'));
}
