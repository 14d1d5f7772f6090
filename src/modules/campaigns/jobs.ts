import { z } from 'zod';
import type { QueueDef } from '../../jobs/boss.ts';
import { runCampaignJob } from './engine.ts';
import { CAMPAIGN_QUEUE, CAMPAIGN_WATCHDOG_QUEUE } from './queue-name.ts';
import { restartStalledCampaigns } from './recovery.ts';
import { CAMPAIGN_WORKERS } from './turns.ts';

const sendPayload = z.object({ campaignId: z.string().uuid(), slowAudience: z.boolean().optional() });

export const campaignSendQueue: QueueDef<z.infer<typeof sendPayload>> = {
  name: CAMPAIGN_QUEUE,
  schema: sendPayload,
  handler: (ctx, data, job) => runCampaignJob(ctx, data.campaignId, job.id, { slow: data.slowAudience === true }),
  // Slow audience reads hold one of them at most, whatever the project (turns.ts).
  workers: CAMPAIGN_WORKERS,
  retryLimit: 20,
  retryDelaySeconds: 2,
  // A job runs for about five seconds (an audience statement 1 s at most, or 10 s in a slow lane:
  // campaigns/audience.ts readAudienceInTime); one held longer belongs to a dead worker.
  expireInSeconds: 60,
};

export const campaignWatchdogQueue: QueueDef<Record<string, never>> = {
  name: CAMPAIGN_WATCHDOG_QUEUE,
  schema: z.object({}).passthrough() as unknown as z.ZodType<Record<string, never>>,
  handler: async (ctx) => void (await restartStalledCampaigns(ctx)),
  cron: '* * * * *',
  retryLimit: 1,
};

export const campaignQueues = [campaignSendQueue, campaignWatchdogQueue];
