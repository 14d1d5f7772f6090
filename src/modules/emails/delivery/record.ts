import { eq } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { type EmailStatus, emailRaw, emails } from '../../../db/schema/emails.ts';
import { recordEvent } from '../../events/record.ts';
import { setSubscribed } from '../../contacts/service.ts';
import { suppressAddress } from '../../suppressions/service.ts';
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

/** The relay (or capture) accepted the message. Captured messages are stored and count as delivered. */
export async function recordAccepted(
  ctx: AppContext,
  email: ClaimedEmail,
  composed: { raw: Buffer; subject: string; messageId: string },
): Promise<void> {
  const now = ctx.clock.now();
  const captured = ctx.mailer.mode === 'capture';
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx
      .update(emails)
      .set({
        status: captured ? 'DELIVERED' : 'SENT',
        subject: composed.subject,
        messageId: composed.messageId,
        error: null,
        lockedUntil: null,
        sentAt: now,
        deliveredAt: captured ? now : null,
        updatedAt: now,
      })
      .where(eq(emails.id, email.id));
    if (captured) await tx.insert(emailRaw).values({ emailId: email.id, raw: composed.raw }).onConflictDoNothing();
    if (email.contactId) {
      const data = emailEventData(email, composed.subject);
      const base = { projectId: email.projectId, contactId: email.contactId, data, createdAt: now };
      await recordEvent(tx, { ...base, name: 'email.sent' });
      if (captured) await recordEvent(tx, { ...base, name: 'email.delivered' });
    }
  });
}

/**
 * A hard bounce (the relay refused the recipient for good): the email is BOUNCED, the address
 * suppressed in the project and the contact unsubscribed with `{ reason: 'bounce' }`.
 */
export async function recordHardBounce(ctx: AppContext, email: ClaimedEmail, subject: string | null, response: string): Promise<void> {
  const now = ctx.clock.now();
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx
      .update(emails)
      .set({ status: 'BOUNCED', error: response, bouncedAt: now, lockedUntil: null, subject, updatedAt: now })
      .where(eq(emails.id, email.id));
    await suppressAddress(tx, email.projectId, email.toEmail, 'bounce', email.id, now);
    if (email.contactId) {
      await recordEvent(tx, {
        projectId: email.projectId,
        contactId: email.contactId,
        name: 'email.bounced',
        data: emailEventData(email, subject, { bounceType: 'Permanent', error: response }),
        createdAt: now,
      });
      await setSubscribed(tx, email.projectId, email.contactId, false, { reason: 'bounce' });
    }
  });
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
