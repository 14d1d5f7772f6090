import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { QUICK_REEVALUATION, REEVALUATE_QUEUE, recomputeAllSegments, reevaluateContact } from './membership.ts';

const reevaluatePayload = z.object({ projectId: z.string(), contactId: z.string() });
type Reevaluation = z.infer<typeof reevaluatePayload>;

const REEVALUATE_SLOW_QUEUE = 'segments-reevaluate-contact-slow';
// Slow projects take turns in the slow lane: each one's first job before any project's second.
const sendToSlowLane = (ctx: AppContext, job: Reevaluation) =>
  ctx.jobs.send(REEVALUATE_SLOW_QUEUE, job, { singletonKey: `${job.projectId}:${job.contactId}`, priority: -ctx.slowReevaluations.nextTurn(job.projectId) });

/**
 * One contact's tracked segments, soon after its data or events changed (scheduleSegmentReevaluation):
 * the quick lane, every project's jobs ten at a time. A job that outruns its 1 s bound goes to the
 * slow lane and its project is remembered there for a while (ctx.slowReevaluations), so that one
 * project's slow segments cost this lane a second per process, not one for each of its contacts.
 */
export const reevaluateContactQueue: QueueDef<Reevaluation> = {
  name: REEVALUATE_QUEUE,
  schema: reevaluatePayload,
  // `short`: while a job for the contact waits, later changes fold into it (singletonKey per contact).
  policy: 'short',
  batchSize: 10,
  retryLimit: 3,
  handler: async (ctx, job) => {
    if (ctx.slowReevaluations.isSlow(job.projectId)) {
      await sendToSlowLane(ctx, job);
      return;
    }
    if ((await reevaluateContact(ctx, job.projectId, job.contactId, QUICK_REEVALUATION)) === 'done') return;
    ctx.slowReevaluations.remember(job.projectId);
    await sendToSlowLane(ctx, job);
  },
};

/** The slow lane: one job at a time per process, with the full bounds (segments/membership.ts SLOW_REEVALUATION). */
export const reevaluateContactSlowQueue: QueueDef<Reevaluation> = {
  name: REEVALUATE_SLOW_QUEUE,
  schema: reevaluatePayload,
  policy: 'short',
  retryLimit: 3,
  handler: async (ctx, job) => {
    await reevaluateContact(ctx, job.projectId, job.contactId);
  },
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

export const segmentQueues = [reevaluateContactQueue, reevaluateContactSlowQueue, recomputeSegmentsQueue];
