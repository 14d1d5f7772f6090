import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { redriveStrandedEmails } from '../emails/delivery/recovery.ts';
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
 *   It skips a campaign whose row is locked rather than wait for it.
 */

const STALL_SECONDS = 20;

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
  if (stalled) await redriveStrandedEmails(ctx, { campaignId });
  if (moved || stalled) {
    await db.execute(sql`
      UPDATE campaigns SET pending_count = ${pending}, progress_at = now() WHERE id = ${campaignId} AND send_job_id = ${jobId}`);
  }
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
      // SKIP LOCKED: a campaign whose row is locked has a job at work on it (not lost), and the
      // watchdog serves every tenant, so it never waits behind one campaign (the next sweep looks again).
      const locked = await t.tx.execute(sql`SELECT 1 FROM campaigns AS c WHERE c.id = ${id} AND (${stalled}) FOR UPDATE SKIP LOCKED`);
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
