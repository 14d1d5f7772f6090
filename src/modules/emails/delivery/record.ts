import { eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { prefixedId } from '../../../db/ids.ts';
import { type EmailStatus, emailRaw, emails } from '../../../db/schema/emails.ts';
import { recordEvent } from '../../events/record.ts';
import type { ClaimedEmail } from './claim.ts';
import { DELIVERY_QUEUE } from './queue-name.ts';

/** The data every email.* event carries. */
export function emailEventData(email: ClaimedEmail, subject: string | null, extra: Record<string, unknown> = {}) {
  const data: Record<string, unknown> = { emailId: email.id, subject: subject ?? email.subject ?? email.subjectSource };
  if (email.campaignId) data.campaignId = email.campaignId;
  if (email.templateId) data.templateId = email.templateId;
  if (email.workflowId) data.workflowId = email.workflowId;
  return { ...data, ...extra };
}

type Final = Extract<EmailStatus, 'FAILED' | 'SKIPPED' | 'SUPPRESSED'>;

/** Ends an email without sending it. FAILED emits email.failed. */
export async function recordNotSent(ctx: AppContext, email: ClaimedEmail, status: Final, error: string): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx.update(emails).set({ status, error, lockedUntil: null, updatedAt: ctx.clock.now() }).where(eq(emails.id, email.id));
    if (status === 'FAILED' && email.contactId) {
      await recordEvent(tx, {
        projectId: email.projectId,
        contactId: email.contactId,
        name: 'email.failed',
        data: emailEventData(email, null, { error }),
        createdAt: ctx.clock.now(),
      });
    }
  });
}

export type Accepted = { email: ClaimedEmail; raw: Buffer; subject: string; messageId: string; at: Date };

/**
 * The relay (or capture) accepted this message. Recorded at once and in ONE statement (status,
 * captured source, email.sent/email.delivered events), so the window in which a crash could leave
 * an accepted message unrecorded — and so re-sent after the claim lease — is one round trip.
 */
export async function recordAccepted(ctx: AppContext, a: Accepted): Promise<void> {
  const captured = ctx.mailer.mode === 'capture';
  const data = JSON.stringify(emailEventData(a.email, a.subject));
  const at = a.at.toISOString();
  await ctx.database.db.execute(sql`
    WITH updated AS (
      UPDATE emails
         SET status = ${captured ? 'DELIVERED' : 'SENT'}, subject = ${a.subject}, message_id = ${a.messageId}, error = NULL,
             locked_until = NULL, sent_at = ${at}::timestamptz,
             delivered_at = ${captured ? sql`${at}::timestamptz` : sql`NULL`}, updated_at = ${at}::timestamptz
       WHERE id = ${a.email.id}::uuid
       RETURNING id, project_id, contact_id
    ), stored AS (
      INSERT INTO email_raw (email_id, raw)
      SELECT id, ${captured ? a.raw : null}::bytea FROM updated WHERE ${captured}
      ON CONFLICT DO NOTHING
    )
    INSERT INTO events (id, project_id, contact_id, name, data, created_at)
    SELECT ev.id, u.project_id, u.contact_id, ev.name, ${data}::jsonb, ${at}::timestamptz
      FROM updated u
      CROSS JOIN (VALUES (${prefixedId('evt')}, 'email.sent'), (${prefixedId('evt')}, 'email.delivered')) AS ev(id, name)
     WHERE u.contact_id IS NOT NULL AND (ev.name = 'email.sent' OR ${captured})`);
}



/** A temporary failure: back to QUEUED with the server's reply, and a new delivery job at `retryAt`. */
export async function recordRetry(ctx: AppContext, email: ClaimedEmail, response: string, retryAt: Date): Promise<void> {
  await withTransaction(ctx.database, async ({ tx, client }) => {
    await tx
      .update(emails)
      .set({ status: 'QUEUED', error: response, lockedUntil: null, updatedAt: ctx.clock.now() })
      .where(eq(emails.id, email.id));
    await ctx.jobs.send(DELIVERY_QUEUE, { emailId: email.id }, { client, startAfter: retryAt });
  });
}
