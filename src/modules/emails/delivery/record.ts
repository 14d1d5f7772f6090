import { eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { type EmailStatus, emailRaw, emails } from '../../../db/schema/emails.ts';
import { recordEvent, recordEvents } from '../../events/record.ts';
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
 * The relay (or capture) accepted these messages: one transaction for the batch. Captured
 * messages are stored and count as delivered. Events: email.sent (and email.delivered).
 */
export async function recordAccepted(ctx: AppContext, accepted: Accepted[]): Promise<void> {
  if (accepted.length === 0) return;
  const captured = ctx.mailer.mode === 'capture';
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx.execute(sql`
      UPDATE emails AS e
         SET status = ${captured ? 'DELIVERED' : 'SENT'}, subject = v.subject, message_id = v.message_id, error = NULL,
             locked_until = NULL, sent_at = v.at, delivered_at = ${captured ? sql`v.at` : sql`NULL`}, updated_at = v.at
        FROM unnest(${uuidArray(accepted.map((a) => a.email.id))}, ${textArray(accepted.map((a) => a.subject))},
                    ${textArray(accepted.map((a) => a.messageId))}, ${timestampArray(accepted.map((a) => a.at))})
             AS v(id, subject, message_id, at)
       WHERE e.id = v.id`);
    if (captured) {
      await tx.insert(emailRaw).values(accepted.map((a) => ({ emailId: a.email.id, raw: a.raw }))).onConflictDoNothing();
    }
    const names = captured ? ['email.sent', 'email.delivered'] : ['email.sent'];
    const rows = accepted
      .filter((a) => a.email.contactId)
      .flatMap((a) =>
        names.map((name) => ({ projectId: a.email.projectId, contactId: a.email.contactId, name, data: emailEventData(a.email, a.subject), createdAt: a.at })),
      );
    await recordEvents(tx, rows);
  });
}

const uuidArray = (values: string[]) => sql`${sql.param(values)}::uuid[]`;
const textArray = (values: string[]) => sql`${sql.param(values)}::text[]`;
const timestampArray = (values: Date[]) => sql`${sql.param(values.map((d) => d.toISOString()))}::timestamptz[]`;

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
