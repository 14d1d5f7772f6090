import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import type { QueueDef } from '../jobs/boss.ts';
import { buildMessage } from './build-message.ts';

/**
 * Herald's own mail to dashboard users (email verification, password reset): not project mail,
 * so no contact, no DKIM key of a project. Sent through the same transport; in capture mode it is
 * written to the log so a developer can follow the link.
 */
const payload = z.object({ to: z.string().email(), subject: z.string(), html: z.string() });

export const SYSTEM_MAIL_QUEUE = 'system-mail';

export function systemSender(ctx: AppContext): string {
  return `no-reply@${new URL(ctx.config.publicUrl).hostname}`;
}

export async function sendSystemMail(ctx: AppContext, mail: z.infer<typeof payload>): Promise<void> {
  const from = systemSender(ctx);
  const raw = await buildMessage({
    messageId: `<${randomUUID()}@${from.split('@')[1]}>`,
    date: ctx.clock.now(),
    from: { email: from, name: 'Herald' },
    to: { email: mail.to },
    subject: mail.subject,
    html: mail.html,
    headers: { 'Auto-Submitted': 'auto-generated' },
  });
  if (ctx.mailer.mode === 'capture') {
    ctx.log.info({ to: mail.to, subject: mail.subject, html: mail.html }, 'system email captured (SMTP_URL is not set)');
    return;
  }
  const outcome = await ctx.mailer.send(raw, { from, to: mail.to });
  if (outcome.kind === 'transient') throw new Error(`system email not sent yet: ${outcome.response}`);
  if (outcome.kind !== 'accepted') ctx.log.warn({ to: mail.to, response: outcome.response }, 'system email refused');
}

export const systemMailQueue: QueueDef<z.infer<typeof payload>> = {
  name: SYSTEM_MAIL_QUEUE,
  schema: payload,
  handler: sendSystemMail,
  retryLimit: 8,
  retryDelaySeconds: 30,
};
