import { z } from 'zod';
import type { QueueDef } from '../../jobs/boss.ts';
import { REEVALUATE_QUEUE, recomputeAllSegments, reevaluateContact } from './membership.ts';

const reevaluatePayload = z.object({ projectId: z.string(), contactId: z.string() });

/** One contact's tracked segments, soon after its data or events changed (scheduleSegmentReevaluation). */
export const reevaluateContactQueue: QueueDef<z.infer<typeof reevaluatePayload>> = {
  name: REEVALUATE_QUEUE,
  schema: reevaluatePayload,
  // `short`: while a job for the contact waits, later changes fold into it (singletonKey per contact).
  policy: 'short',
  batchSize: 10,
  retryLimit: 3,
  handler: (ctx, data) => reevaluateContact(ctx, data.projectId, data.contactId),
};

const empty = z.object({}).passthrough();

/** Every 5 minutes: tracked segments recomputed in full (time-based filters), every count refreshed. */
export const recomputeSegmentsQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'segments-recompute',
  schema: empty,
  cron: '*/5 * * * *',
  retryLimit: 1,
  expireInSeconds: 15 * 60,
  handler: (ctx) => recomputeAllSegments(ctx),
};

export const segmentQueues = [reevaluateContactQueue, recomputeSegmentsQueue];
