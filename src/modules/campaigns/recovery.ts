import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { DELIVERY_QUEUE } from '../emails/delivery/queue-name.ts';
import { handOver } from './chain.ts';
import { pendingEmails, windowSize } from './fanout.ts';

/**
 * Liveness after a crash. A worker killed mid-job leaves its pg-boss jobs `active` until they
 * expire (minutes): its campaign job, the delivery jobs it had fetched, and the emails it had
 * claimed (until their lease ends). Two mechanisms bring a campaign back sooner, never at the cost
 * of a duplicate (the fan-out works under the row lock from its stored cursor; delivery claims are
 * check-and-set, so an extra delivery job for an email is a no-op):
 *
 * - `watchProgress` (every engine tick): when the number of the campaign's waiting emails has not
 *   moved for STALL_SECONDS, emails left without a live delivery job get a new one.
 * - `restartStalledCampaigns` (cron, every minute): a SENDING campaign whose engine has not ticked
 *   for 30 s, or a SCHEDULED one 30 s overdue, gets a new engine job; the lost one becomes stale.
 */

const STALL_SECONDS = 20;
/** A delivery job `active` for longer than this while its email is still waiting belongs to a dead worker. */
const DEAD_ACTIVE_SECONDS = 30;
const REDRIVE_LIMIT = 5000;

/** Records the campaign's progress; after a stall, re-drives its stranded emails. */
export async function watchProgress(ctx: AppContext, campaignId: string, jobId: string): Promise<void> {
  const db = ctx.database.db;
  const pending = await pendingEmails(db, campaignId, windowSize(ctx.config) * 2);
  const { rows } = await db.execute<{ pending_count: number; quiet_for: number | null }>(sql`
    SELECT pending_count, extract(epoch FROM now() - progress_at)::float8 AS quiet_for
      FROM campaigns WHERE id = ${campaignId} AND send_job_id = ${jobId}`);
  const c = rows[0];
  if (!c) return;
  const moved = c.pending_count !== pending || c.quiet_for === null;
  const stalled = !moved && pending > 0 && c.quiet_for! >= STALL_SECONDS;
  if (stalled) await redriveStranded(ctx, campaignId);
  if (moved || stalled) {
    await db.execute(sql`
      UPDATE campaigns SET pending_count = ${pending}, progress_at = now() WHERE id = ${campaignId} AND send_job_id = ${jobId}`);
  }
}

/**
 * Emails of the campaign waiting for delivery (QUEUED, or SENDING with an expired claim lease)
 * that no live delivery job will pick up: none created or retrying, none active for less than
 * DEAD_ACTIVE_SECONDS. Reads pg-boss's job table (schema `pgboss`, see src/jobs/boss.ts).
 */
export async function redriveStranded(ctx: AppContext, campaignId: string): Promise<number> {
  const { rows } = await ctx.database.db.execute<{ id: string }>(sql`
    SELECT e.id FROM emails AS e
     WHERE e.campaign_id = ${campaignId}
       AND (e.status = 'QUEUED' OR (e.status = 'SENDING' AND e.locked_until < now()))
       AND NOT EXISTS (
         SELECT 1 FROM pgboss.job AS j
          WHERE j.name = ${DELIVERY_QUEUE}
            AND j.data->>'emailId' = e.id::text
            AND (j.state IN ('created', 'retry')
                 OR (j.state = 'active' AND j.started_on > now() - make_interval(secs => ${DEAD_ACTIVE_SECONDS}))))
     LIMIT ${REDRIVE_LIMIT}`);
  if (rows.length === 0) return 0;
  await ctx.jobs.boss.insert(rows.map((r) => ({ name: DELIVERY_QUEUE, data: { emailId: r.id } })));
  ctx.log.warn({ campaignId, emails: rows.length }, 'campaign emails had no live delivery job; re-queued them');
  return rows.length;
}

/** The watchdog cron: restarts the engine of campaigns whose engine job was lost. */
export async function restartStalledCampaigns(ctx: AppContext): Promise<number> {
  const stalled = sql`(c.status = 'SENDING' AND (c.heartbeat_at IS NULL OR c.heartbeat_at < now() - interval '30 seconds'))
     OR (c.status = 'SCHEDULED' AND c.scheduled_for < now() - interval '30 seconds')`;
  const { rows } = await ctx.database.db.execute<{ id: string }>(sql`
    SELECT c.id FROM campaigns AS c WHERE c.status IN ('SCHEDULED', 'SENDING') AND (${stalled}) LIMIT 1000`);
  let restarted = 0;
  for (const { id } of rows) {
    const done = await withTransaction(ctx.database, async (t) => {
      const locked = await t.tx.execute(sql`SELECT 1 FROM campaigns AS c WHERE c.id = ${id} AND (${stalled}) FOR UPDATE`);
      if (locked.rows.length === 0) return false;
      await handOver(ctx, t, id);
      return true;
    });
    if (done) {
      restarted += 1;
      ctx.log.warn({ campaignId: id }, 'campaign engine was not running; restarted it');
    }
  }
  return restarted;
}
