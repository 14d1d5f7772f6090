import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';

/**
 * SENDING → SENT once every recipient has an email and none of them is still QUEUED or SENDING.
 * `totalRecipients` becomes the exact number of emails written. True when the campaign is finished
 * (or no longer this job's to finish).
 */
export async function finalise(ctx: AppContext, campaignId: string, jobId: string): Promise<boolean> {
  const now = ctx.clock.now().toISOString();
  const { rows } = await ctx.database.db.execute<{ status: string; send_job_id: string | null }>(sql`
    WITH done AS (
      UPDATE campaigns AS c
         SET status = 'SENT', completed_at = ${now}::timestamptz, updated_at = ${now}::timestamptz, send_job_id = NULL,
             pending_count = 0,
             total_recipients = (SELECT count(*)::int FROM emails AS e WHERE e.campaign_id = c.id)
       WHERE c.id = ${campaignId} AND c.status = 'SENDING' AND c.fanout_done AND c.send_job_id = ${jobId}
         AND NOT EXISTS (SELECT 1 FROM emails AS e WHERE e.campaign_id = c.id AND e.status IN ('QUEUED', 'SENDING'))
      RETURNING c.status, c.send_job_id
    )
    SELECT status, send_job_id FROM done
    UNION ALL
    SELECT status, send_job_id FROM campaigns WHERE id = ${campaignId} AND NOT EXISTS (SELECT 1 FROM done)`);
  const row = rows[0];
  return !row || row.status !== 'SENDING' || row.send_job_id !== jobId;
}
