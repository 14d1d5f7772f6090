import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';

/**
 * EMAIL_CONTENT_RETENTION_DAYS: the stored sources of emails older than the setting are cleared
 * (email_contents' body, variables, headers and attachments; the captured message in email_raw),
 * a bounded batch per statement. The email rows stay (status, counters, analytics), and so does
 * the content row (emails reference it), marked `cleared_at`. A content still needed by an email
 * waiting for delivery is left alone.
 */

const BATCH = 1_000;
const BATCHES_PER_RUN = 50;

/** Clears the expired contents; returns how many were cleared. Idempotent; workers skip each other's rows. */
export async function clearExpiredEmailContents(ctx: AppContext): Promise<number> {
  const days = ctx.config.emailContentRetentionDays;
  if (days === undefined) return 0;
  const now = ctx.clock.now();
  const cutoff = new Date(now.getTime() - days * 86_400_000).toISOString();
  let cleared = 0;
  for (let i = 0; i < BATCHES_PER_RUN; i++) {
    const { rowCount } = await ctx.database.db.execute(sql`
      WITH expired AS (
        SELECT c.id FROM email_contents AS c
         WHERE c.cleared_at IS NULL AND c.created_at < ${cutoff}::timestamptz
           AND NOT EXISTS (SELECT 1 FROM emails AS e WHERE e.content_id = c.id AND e.status IN ('QUEUED', 'SENDING'))
         ORDER BY c.created_at
         LIMIT ${BATCH}
         FOR UPDATE SKIP LOCKED
      ), raw AS (
        DELETE FROM email_raw AS r USING emails AS e, expired
         WHERE e.content_id = expired.id AND r.email_id = e.id
      )
      UPDATE email_contents AS c
         SET body_source = '', variables = '{}'::jsonb, headers = '{}'::jsonb, attachments = NULL, cleared_at = ${now.toISOString()}::timestamptz
        FROM expired WHERE c.id = expired.id`);
    cleared += rowCount ?? 0;
    if ((rowCount ?? 0) < BATCH) break;
  }
  return cleared;
}

/** Whether the email's stored source was cleared by the retention setting. */
export async function emailSourceCleared(ctx: AppContext, emailId: string): Promise<boolean> {
  const { rows } = await ctx.database.db.execute<{ cleared: boolean }>(sql`
    SELECT c.cleared_at IS NOT NULL AS cleared FROM emails AS e JOIN email_contents AS c ON c.id = e.content_id WHERE e.id = ${emailId}`);
  return rows[0]?.cleared ?? false;
}
