import { eq } from 'drizzle-orm';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { emails } from '../../db/schema/emails.ts';
import { markDelivered } from '../emails/lifecycle.ts';
import { recordBounce, recordComplaint } from '../suppressions/feedback.ts';
import { recordClick, recordOpen } from '../tracking/service.ts';

/**
 * Amazon SES event notifications (the Message of an SNS Notification), both the identity
 * notifications (`notificationType`) and configuration-set event publishing (`eventType`).
 * The email is found by the Message-ID header we set (`<uuid@domain>`, emails.message_id), and only
 * when the event also names that email's sender (`mail.source`, the project's from address) and its
 * recipient: a Message-ID alone is visible to every recipient and proves nothing.
 */

const timestamp = z.string().max(100).optional();
const recipient = z.object({ emailAddress: z.string().max(320), diagnosticCode: z.string().max(2000).optional() }).passthrough();

export const sesEventSchema = z
  .object({
    eventType: z.string().max(50).optional(),
    notificationType: z.string().max(50).optional(),
    mail: z
      .object({
        timestamp,
        source: z.string().max(1000).optional(),
        destination: z.array(z.string().max(1000)).max(100).optional(),
        messageId: z.string().max(500).optional(),
        headers: z.array(z.object({ name: z.string(), value: z.string() }).passthrough()).optional(),
        commonHeaders: z
          .object({ messageId: z.string().max(1000).optional() })
          .passthrough()
          .optional(),
      })
      .passthrough(),
    bounce: z
      .object({
        bounceType: z.string().max(50),
        bounceSubType: z.string().max(100).optional(),
        bouncedRecipients: z.array(recipient).max(100).default([]),
        timestamp,
      })
      .passthrough()
      .optional(),
    complaint: z
      .object({
        complainedRecipients: z.array(recipient).max(100).default([]),
        complaintFeedbackType: z.string().max(100).optional(),
        timestamp,
      })
      .passthrough()
      .optional(),
    delivery: z
      .object({ timestamp, smtpResponse: z.string().max(2000).optional(), recipients: z.array(z.string().max(1000)).max(100).optional() })
      .passthrough()
      .optional(),
    open: z.object({ timestamp }).passthrough().optional(),
    click: z
      .object({ timestamp, link: z.string().max(8192) })
      .passthrough()
      .optional(),
  })
  .passthrough();

export type SesEvent = z.infer<typeof sesEventSchema>;

export type SesOutcome = 'processed' | 'ignored';

/** Our Message-ID of the email the event is about, normalised as stored (`<…>`, lower case). */
export function messageIdOf(e: SesEvent): string | null {
  const header = e.mail.headers?.find((h) => h.name.toLowerCase() === 'message-id')?.value ?? e.mail.commonHeaders?.messageId;
  if (!header) return null;
  const bare = header.trim().replace(/^<|>$/g, '');
  return bare ? `<${bare.toLowerCase()}>` : null;
}

/** A valid timestamp from the event, or now. */
function timeOf(ctx: AppContext, value: string | undefined): Date {
  const t = value ? new Date(value) : null;
  return t && !Number.isNaN(t.getTime()) ? t : ctx.clock.now();
}

/** The bare, lower-cased address of `a@b` or `Name <a@b>`. */
function address(value: string): string {
  const m = /<([^<>]*)>\s*$/.exec(value);
  return (m ? m[1] : value).trim().toLowerCase();
}

/** The addresses the event is about: the reported recipients of a bounce or complaint, else the message's destination. */
function recipientsOf(e: SesEvent, type: string | undefined): string[] {
  if (type === 'Bounce') return (e.bounce?.bouncedRecipients ?? []).map((r) => address(r.emailAddress));
  if (type === 'Complaint') return (e.complaint?.complainedRecipients ?? []).map((r) => address(r.emailAddress));
  return (e.delivery?.recipients ?? e.mail.destination ?? []).map(address);
}

export async function applySesEvent(ctx: AppContext, e: SesEvent): Promise<SesOutcome> {
  const messageId = messageIdOf(e);
  if (!messageId || !e.mail.source) return 'ignored';
  const type = e.eventType ?? e.notificationType;
  const [email] = await ctx.database.db.select().from(emails).where(eq(emails.messageId, messageId)).limit(1);
  if (!email) return 'ignored';
  if (address(e.mail.source) !== email.fromEmail.toLowerCase()) return 'ignored';
  if (!recipientsOf(e, type).includes(email.toEmail.toLowerCase())) return 'ignored';
  switch (type) {
    case 'Delivery':
      await markDelivered(ctx, email, timeOf(ctx, e.delivery?.timestamp));
      return 'processed';
    case 'Bounce': {
      if (!e.bounce) return 'ignored';
      const type = e.bounce.bounceType === 'Permanent' ? 'Permanent' : e.bounce.bounceType === 'Transient' ? 'Transient' : 'Undetermined';
      const mine = e.bounce.bouncedRecipients.find((r) => address(r.emailAddress) === email.toEmail.toLowerCase());
      await recordBounce(ctx, email, {
        type,
        diagnostic: mine?.diagnosticCode ?? `${e.bounce.bounceType}${e.bounce.bounceSubType ? ` (${e.bounce.bounceSubType})` : ''}`,
        at: timeOf(ctx, e.bounce.timestamp),
        details: e.bounce.bounceSubType ? { bounceSubType: e.bounce.bounceSubType } : {},
      });
      return 'processed';
    }
    case 'Complaint':
      await recordComplaint(ctx, email, {
        at: timeOf(ctx, e.complaint?.timestamp),
        details: e.complaint?.complaintFeedbackType ? { complaintFeedbackType: e.complaint.complaintFeedbackType } : {},
      });
      return 'processed';
    case 'Open':
      await recordOpen(ctx, email.id, timeOf(ctx, e.open?.timestamp));
      return 'processed';
    case 'Click':
      if (!e.click) return 'ignored';
      await recordClick(ctx, email.id, e.click.link, timeOf(ctx, e.click.timestamp));
      return 'processed';
    default:
      return 'ignored';
  }
}
