import { and, eq, isNull, notInArray, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { emails } from '../../db/schema/emails.ts';
import { setSubscribed } from '../contacts/service.ts';
import type { ClaimedEmail } from '../emails/delivery/claim.ts';
import { emailEventData } from '../emails/delivery/record.ts';
import { recordEvent } from '../events/record.ts';
import { evaluateReputation } from '../reputation/guard.ts';
import { suppressAddress } from './service.ts';

type EmailRow = ClaimedEmail;

export type BounceType = 'Permanent' | 'Transient' | 'Undetermined';

export type Bounce = {
  type: BounceType;
  /** The receiving server's reply or SES's diagnostic. */
  diagnostic: string | null;
  at?: Date;
  /** The rendered subject, when the caller just composed the message. */
  subject?: string | null;
  /** SES's bounce sub-type and the like, added to the event data. */
  details?: Record<string, unknown>;
};

/**
 * A bounce, from the SMTP relay (a 5xx refusal of the recipient) or from SES. A permanent bounce
 * ends the email BOUNCED, suppresses the address in the project, unsubscribes the contact with
 * `{ reason: 'bounce' }` and re-evaluates the project's reputation. A transient one is only an
 * `email.bounced` event (the provider may still deliver; it does not count against reputation).
 * Every step runs once per email, however often the bounce is reported.
 */
export async function recordBounce(ctx: AppContext, email: EmailRow, b: Bounce): Promise<void> {
  const at = b.at ?? ctx.clock.now();
  const permanent = b.type === 'Permanent';
  const data = (subject: string | null) =>
    emailEventData(email, subject, { bounceType: b.type, ...(b.diagnostic ? { error: b.diagnostic } : {}), ...b.details });
  if (!permanent) {
    if (email.contactId) {
      await recordEvent(ctx.database.db, { projectId: email.projectId, contactId: email.contactId, name: 'email.bounced', data: data(null), createdAt: at });
    }
    return;
  }
  const changed = await withTransaction(ctx.database, async ({ tx }) => {
    const [row] = await tx
      .update(emails)
      .set({
        status: 'BOUNCED',
        error: b.diagnostic,
        bouncedAt: at,
        lockedUntil: null,
        subject: b.subject !== undefined ? b.subject : sql`${emails.subject}`,
        updatedAt: ctx.clock.now(),
      })
      .where(and(eq(emails.id, email.id), notInArray(emails.status, ['BOUNCED', 'COMPLAINED'])))
      .returning({ subject: emails.subject });
    if (!row) return false;
    await suppressAddress(tx, email.projectId, email.toEmail, 'bounce', email.id, at);
    if (email.contactId) {
      await recordEvent(tx, { projectId: email.projectId, contactId: email.contactId, name: 'email.bounced', data: data(row.subject), createdAt: at });
      await setSubscribed(tx, email.projectId, email.contactId, false, { reason: 'bounce' }, { now: at });
    }
    return true;
  });
  if (changed) await evaluateReputation(ctx, email.projectId);
}

/**
 * A spam complaint: the email is COMPLAINED (when it had been sent or delivered), the address
 * suppressed, the contact unsubscribed with `{ reason: 'complaint' }`, and the project's reputation
 * re-evaluated. Counted once per email.
 */
export async function recordComplaint(
  ctx: AppContext,
  email: EmailRow,
  c: { at?: Date; details?: Record<string, unknown> } = {},
): Promise<void> {
  const at = c.at ?? ctx.clock.now();
  const changed = await withTransaction(ctx.database, async ({ tx }) => {
    const [row] = await tx
      .update(emails)
      .set({
        status: sql`CASE WHEN ${emails.status} IN ('SENT', 'DELIVERED') THEN 'COMPLAINED' ELSE ${emails.status} END`,
        complainedAt: at,
        updatedAt: ctx.clock.now(),
      })
      .where(and(eq(emails.id, email.id), isNull(emails.complainedAt)))
      .returning({ id: emails.id });
    if (!row) return false;
    await suppressAddress(tx, email.projectId, email.toEmail, 'complaint', email.id, at);
    if (email.contactId) {
      await recordEvent(tx, {
        projectId: email.projectId,
        contactId: email.contactId,
        name: 'email.complained',
        data: emailEventData(email, null, { ...c.details }),
        createdAt: at,
      });
      await setSubscribed(tx, email.projectId, email.contactId, false, { reason: 'complaint' }, { now: at });
    }
    return true;
  });
  if (changed) await evaluateReputation(ctx, email.projectId);
}
