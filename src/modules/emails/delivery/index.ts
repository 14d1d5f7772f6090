import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { AppContext } from '../../../context.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { RenderLimitError, TemplateRenderError, TemplateSyntaxError } from '../../../render/engine.ts';
import { getContact } from '../../contacts/service.ts';
import { senderDomainFor } from '../../domains/sender.ts';
import { isSuppressed } from '../../suppressions/service.ts';
import { type ClaimedEmail, claimEmail, peekEmail } from './claim.ts';
import { composeMessage } from './compose.ts';
import { DELIVERY_QUEUE } from './queue-name.ts';
import { recordAccepted, recordHardBounce, recordNotSent, recordRetry } from './record.ts';
import { reserveSendSlot } from './throttle.ts';

/** A reserved send slot further away than this is waited for in the queue, not in the worker. */
const MAX_INLINE_WAIT_MS = 2000;
const MAX_BACKOFF_SECONDS = 6 * 3600;

const payload = z.object({ emailId: z.string().uuid(), slot: z.string().datetime().optional() });

/**
 * The delivery engine: throttle → claim → check → compose → send → record. Each step is its own
 * module; this facade only sequences them. Safe to run twice for one email (the claim is a
 * check-and-set), safe to crash anywhere (the claim's lease expires and another worker resumes).
 */
export async function deliverEmail(ctx: AppContext, data: z.infer<typeof payload>): Promise<void> {
  const waiting = await peekEmail(ctx, data.emailId);
  if (!waiting) return;

  const slot = data.slot ? new Date(data.slot) : await reserveSendSlot(ctx, waiting.projectId);
  const waitMs = slot.getTime() - Date.now();
  if (waitMs > MAX_INLINE_WAIT_MS) {
    await ctx.jobs.send(DELIVERY_QUEUE, { emailId: data.emailId, slot: slot.toISOString() }, { startAfter: slot });
    return;
  }
  if (waitMs > 0) await sleep(waitMs);

  const email = await claimEmail(ctx, data.emailId);
  if (!email) return;
  await sendClaimed(ctx, email);
}

async function sendClaimed(ctx: AppContext, email: ClaimedEmail): Promise<void> {
  if (await isSuppressed(ctx.database.db, email.projectId, email.toEmail)) {
    return recordNotSent(ctx, email, 'SUPPRESSED', 'Address is suppressed in this project');
  }
  const contact = email.contactId ? await getContact(ctx.database.db, email.projectId, email.contactId).catch(() => null) : null;
  if (email.type !== 'TRANSACTIONAL' && (!contact || !contact.subscribed)) {
    return recordNotSent(ctx, email, 'SKIPPED', 'unsubscribed');
  }

  let composed;
  try {
    const sender = await senderDomainFor(ctx, email.projectId, email.fromEmail);
    composed = await composeMessage(ctx, email, contact, sender);
  } catch (err) {
    const known = err instanceof RenderLimitError || err instanceof TemplateSyntaxError || err instanceof TemplateRenderError || (err as { statusCode?: number }).statusCode === 403;
    if (!known) ctx.log.error({ err, emailId: email.id }, 'composing an email failed');
    return recordNotSent(ctx, email, 'FAILED', known ? (err as Error).message : 'The message could not be built');
  }

  const outcome = await ctx.mailer.send(composed.raw, { from: email.fromEmail, to: email.toEmail });
  switch (outcome.kind) {
    case 'accepted':
      return recordAccepted(ctx, email, composed);
    case 'rejected':
      return recordHardBounce(ctx, email, composed.subject, outcome.response);
    case 'failed':
      return recordNotSent(ctx, email, 'FAILED', outcome.response);
    case 'transient': {
      if (email.attempts >= ctx.config.deliveryMaxAttempts) {
        return recordNotSent(ctx, email, 'FAILED', `Gave up after ${email.attempts} attempts: ${outcome.response}`);
      }
      const delay = Math.min(ctx.config.deliveryRetryBaseSeconds * 4 ** (email.attempts - 1), MAX_BACKOFF_SECONDS);
      return recordRetry(ctx, email, outcome.response, new Date(Date.now() + delay * 1000));
    }
  }
}

export const deliveryQueue: QueueDef<z.infer<typeof payload>> = {
  name: DELIVERY_QUEUE,
  schema: payload,
  handler: (ctx, data) => deliverEmail(ctx, data),
  batchSize: 10,
  workers: 2,
  retryLimit: 10,
  retryDelaySeconds: 10,
  expireInSeconds: 600,
};
