import { sql } from 'drizzle-orm';
import { z } from 'zod';
import type { AppContext } from '../../../context.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { liveJobExists } from '../../../jobs/live-job.ts';
import { DELIVERY_QUEUE, DELIVERY_WATCHDOG_QUEUE } from './queue-name.ts';
import { deliveryJobNames, deliveryJobs } from './job.ts';

/** A delivery job `active` for longer than this while its email is still waiting belongs to a dead worker. */
const DEAD_ACTIVE_SECONDS = 30;
const REDRIVE_LIMIT = 5000;

/**
 * Liveness after a crash. A worker killed mid-batch leaves the delivery jobs it had fetched
 * `active` until pg-boss expires them (ten minutes), and the emails it had claimed SENDING until
 * their lease ends (30 s; live workers renew theirs). Emails waiting for delivery (QUEUED, or
 * SENDING with an expired lease) that no live delivery job will pick up get a new job. Never a
 * duplicate: a delivery claim is a check-and-set, so a second job for an email that was meanwhile
 * sent does nothing.
 */
export async function redriveStrandedEmails(ctx: AppContext, scope: { campaignId?: string } = {}): Promise<number> {
  const { rows } = await ctx.database.db.execute<{ id: string }>(sql`
    SELECT e.id FROM emails AS e
     WHERE e.status IN ('QUEUED', 'SENDING')
       AND (e.status = 'QUEUED' OR e.locked_until < now())
       ${scope.campaignId ? sql`AND e.campaign_id = ${scope.campaignId}` : sql``}
       AND NOT ${liveJobExists(DELIVERY_QUEUE, (data) => deliveryJobNames(data, sql`e.id::text`), DEAD_ACTIVE_SECONDS)}
     LIMIT ${REDRIVE_LIMIT}`);
  if (rows.length === 0) return 0;
  await ctx.jobs.sendMany(DELIVERY_QUEUE, deliveryJobs(rows.map((r) => r.id)));
  ctx.log.warn({ ...scope, emails: rows.length }, 'emails waiting for delivery had no live delivery job; re-queued them');
  return rows.length;
}

/** Every minute: emails stranded by a worker that died are delivered within about a minute and a half, not ten. */
export const deliveryWatchdogQueue: QueueDef<Record<string, never>> = {
  name: DELIVERY_WATCHDOG_QUEUE,
  schema: z.object({}).passthrough() as unknown as z.ZodType<Record<string, never>>,
  handler: async (ctx) => void (await redriveStrandedEmails(ctx)),
  cron: '* * * * *',
  retryLimit: 1,
};
