import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { setSubscribed } from '../contacts/service.ts';
import { type EmailRow as ClaimedEmail, emailEventData, markBounced, markComplained, noteTransientBounce } from '../emails/lifecycle.ts';
import { reputationEventRecorded } from '../reputation/guard.ts';
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
 * `{ reason: 'bounce' }` and has the project's reputation checked (reputation/guard.ts). A transient one is only an
 * `email.bounced` event (the provider may still deliver; it does not count against reputation).
 * Every step runs once per email, however often the bounce is reported.
 */
export async function recordBounce(ctx: AppContext, email: EmailRow, b: Bounce): Promise<void> {
  const at = b.at ?? ctx.clock.now();
  const permanent = b.type === 'Permanent';
  const data = (subject: string | null) =>
    emailEventData(email, subject, { bounceType: b.type, ...(b.diagnostic ? { error: b.diagnostic } : {}), ...b.details });
  if (!permanent) {
    await noteTransientBounce(ctx.database.db, email, at, data(null));
    return;
  }
  const changed = await withTransaction(ctx.database, async ({ tx }) => {
    const bounced = await markBounced(tx, email, { at, now: ctx.clock.now(), diagnostic: b.diagnostic, subject: b.subject, data });
    if (!bounced) return false;
    await suppressAddress(tx, email.projectId, email.toEmail, 'bounce', email.id, at);
    if (email.contactId) await setSubscribed(tx, email.projectId, email.contactId, false, { reason: 'bounce' }, { now: at });
    return true;
  });
  if (changed) await reputationEventRecorded(ctx, email.projectId);
}

/**
 * A spam complaint: the email is COMPLAINED (when it had been sent or delivered), the address
 * suppressed, the contact unsubscribed with `{ reason: 'complaint' }`, and the project's reputation
 * checked. Counted once per email.
 */
export async function recordComplaint(ctx: AppContext, email: EmailRow, c: { at?: Date; details?: Record<string, unknown> } = {}): Promise<void> {
  const at = c.at ?? ctx.clock.now();
  const changed = await withTransaction(ctx.database, async ({ tx }) => {
    if (!(await markComplained(tx, email, { at, now: ctx.clock.now(), details: c.details }))) return false;
    await suppressAddress(tx, email.projectId, email.toEmail, 'complaint', email.id, at);
    if (email.contactId) await setSubscribed(tx, email.projectId, email.contactId, false, { reason: 'complaint' }, { now: at });
    return true;
  });
  if (changed) await reputationEventRecorded(ctx, email.projectId);
}
