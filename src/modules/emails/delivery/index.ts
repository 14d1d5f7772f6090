import { setTimeout as sleep } from 'node:timers/promises';
import { loggableError } from '../../../loggable-error.ts';
import type { AppContext } from '../../../context.ts';
import type { QueueDef } from '../../../jobs/boss.ts';
import { RenderLimitError, TemplateRenderError, TemplateSyntaxError } from '../../../render/engine.ts';
import { ComposeDeferredError, SLOW_COMPOSE_MS } from '../../../render/compose-pool.ts';
import { getContactsByIds } from '../../contacts/batch.ts';
import type { ContactRecord } from '../../contacts/service.ts';
import { type SenderDomain, SenderNotVerifiedError, emailDomain, senderDomainFor } from '../../domains/sender.ts';
import { sendingBlocked } from '../../reputation/guard.ts';
import { recordBounce } from '../../suppressions/feedback.ts';
import { suppressedAmong } from '../../suppressions/service.ts';
import { type ProjectForMail, projectForMail } from '../../projects/settings.ts';
import { composeMessage } from './compose.ts';
import { type StoredContent, contentsOf, fullContent } from './content.ts';
import { logOutcome } from './log.ts';
import { DELIVERY_QUEUE } from './queue-name.ts';
import { DELIVERY_JOB_WEIGHT, DELIVERY_JOB_EMAILS, type DeliveryPayload, deliveryJobs, deliveryPayload } from './job.ts';
import {
  type Accepted,
  CLAIM_RENEW_MS,
  type EmailRow as ClaimedEmail,
  claimEmails,
  markForRetry,
  markNotSent,
  peekEmails,
  releaseClaims,
  renewClaims,
  settleOrphanedHandOffs,
} from '../lifecycle.ts';
import { reserveSendSlots } from './throttle.ts';

/** A reserved send slot further away than this is waited for in the queue, not in the worker. */
const MAX_INLINE_WAIT_MS = 2000;
const MAX_BACKOFF_SECONDS = 6 * 3600;

/**
 * The delivery engine, set-based over a batch of jobs: throttle → claim → check → compose → send
 * → record. Each step is its own module; this facade only sequences them. Safe to run twice for
 * one email (the claim is a check-and-set), safe to crash anywhere (the claim's lease expires and
 * another worker resumes).
 */
export async function deliverBatch(ctx: AppContext, items: DeliveryPayload[]): Promise<void> {
  const givenSlots = new Map(items.flatMap((i) => (i.slot ? i.emailIds.map((id) => [id, new Date(i.slot!)] as const) : [])));
  const found = await peekEmails(ctx, [...new Set(items.flatMap((i) => i.emailIds))]);
  const orphaned = found.filter((e) => e.handedOff);
  if (orphaned.length > 0)
    await settleOrphanedHandOffs(
      ctx,
      orphaned.map((e) => e.id),
    );
  const waiting = found.filter((e) => !e.handedOff);
  if (waiting.length === 0) return;

  const slots = new Map<string, Date>();
  for (const [projectId, ids] of groupBy(waiting, (w) => w.projectId)) {
    const unslotted = ids.filter((w) => !givenSlots.has(w.id));
    const reserved = unslotted.length > 0 ? await reserveSendSlots(ctx, projectId, unslotted.length, composeSpacingMs(ctx, projectId)) : [];
    unslotted.forEach((w, i) => slots.set(w.id, reserved[i]));
    ids.filter((w) => givenSlots.has(w.id)).forEach((w) => slots.set(w.id, givenSlots.get(w.id)!));
  }
  const later = [...slots].filter(([, slot]) => slot.getTime() - Date.now() > MAX_INLINE_WAIT_MS);
  if (later.length > 0) {
    await ctx.jobs.sendMany(
      DELIVERY_QUEUE,
      later.map(([emailId, slot]) => ({ data: { emailIds: [emailId], slot: slot.toISOString() } satisfies DeliveryPayload, startAfter: slot })),
    );
  }
  const now = [...slots].filter(([, slot]) => slot.getTime() - Date.now() <= MAX_INLINE_WAIT_MS).map(([id]) => id);

  const claimed = await claimEmails(ctx, now);
  // Claims are renewed while this batch works on them: a slow relay never loses a live claim, and a
  // killed worker's claims lapse within the short lease.
  const held = new Map(claimed.map((e) => [e.id, e]));
  const renewal = setInterval(() => {
    renewClaims(ctx, [...held.values()]).catch((err: unknown) => ctx.log.warn({ error: loggableError(err) }, 'renewing delivery claims failed'));
  }, CLAIM_RENEW_MS);
  try {
    await sendClaimed(ctx, claimed, slots, held);
  } finally {
    clearInterval(renewal);
  }
}

/**
 * A project whose messages take over SLOW_COMPOSE_MS each to compose gets its send slots spaced by
 * that time (shared by this process's compose threads) when that is wider than its send rate's: its
 * emails come due no faster than they can be composed, instead of piling up claimed in the
 * compose queue. Other projects' spacing is their send rate's.
 */
function composeSpacingMs(ctx: AppContext, projectId: string): number {
  const cost = ctx.threads.compose.costOf(projectId);
  return cost > SLOW_COMPOSE_MS ? cost / ctx.threads.compose.size : 0;
}

/**
 * Checks, composes, sends and records each claimed email, at its reserved slot; `held` loses each
 * email as it is settled. Each project's lookups run one after another, then all the projects'
 * emails are sent side by side: one project's slow messages do not hold another's.
 */
async function sendClaimed(ctx: AppContext, claimed: ClaimedEmail[], slots: Map<string, Date>, held: Map<string, ClaimedEmail>): Promise<void> {
  const contents = await contentsOf(ctx, claimed);
  const sending: Promise<void>[] = [];
  for (const [projectId, batch] of groupBy(claimed, (e) => e.projectId)) {
    const blocked = await sendingBlocked(ctx, projectId);
    const project = await projectForMail(ctx, projectId);
    const suppressed = await suppressedAmong(
      ctx.database.db,
      projectId,
      batch.map((e) => e.toEmail),
    );
    const contacts = await getContactsByIds(
      ctx.database.db,
      projectId,
      batch.flatMap((e) => (e.contactId ? [e.contactId] : [])),
    );
    // One sender lookup per from-domain and batch: the batch's messages start together, and each
    // would miss a cache that is cold or has just expired.
    const senders = new Map<string, Promise<SenderDomain>>();
    const senderOf = (fromEmail: string) => {
      const domain = emailDomain(fromEmail);
      let found = senders.get(domain);
      if (!found) senders.set(domain, (found = senderDomainFor(ctx, projectId, fromEmail)));
      return found;
    };
    const deferred: ClaimedEmail[] = [];
    const sendAt = async (email: ClaimedEmail, content: () => StoredContent | Promise<StoredContent>) => {
      const wait = slots.get(email.id)!.getTime() - Date.now();
      if (wait > 0) await sleep(wait);
      const contact = email.contactId ? (contacts.get(email.contactId) ?? null) : null;
      let givenBack = false;
      try {
        const done = await sendOne(ctx, email, await content(), contact, project, {
          blocked,
          suppressed: suppressed.has(email.toEmail),
          senderOf,
        });
        if (done === DEFERRED) {
          deferred.push(email);
          givenBack = true;
        } else if (done) await ctx.recordAccepted(done);
      } finally {
        if (!givenBack) held.delete(email.id);
      }
    };
    // Emails with large attachments go one at a time, each reading its content (and the last one
    // read kept for the next email that shares it), beside the others: a batch never holds more
    // than one large message.
    const heavy = batch.filter((e) => contents.get(e.contentId)!.heavy);
    const oneByOne = async () => {
      let last: StoredContent | null = null;
      for (const email of heavy) {
        await sendAt(email, async () => (last = last?.id === email.contentId ? last : await fullContent(ctx, email.contentId)));
      }
    };
    const sends = [...batch.filter((e) => !contents.get(e.contentId)!.heavy).map((e) => sendAt(e, () => contents.get(e.contentId)!)), oneByOne()];
    sending.push(allSettled(sends).finally(() => giveBack(ctx, deferred, held)));
  }
  await allSettled(sending);
}

/** Waits for every promise; then throws the first rejection, if any (a rejection never goes unhandled while others run). */
async function allSettled(promises: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(promises)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * Emails given back untried: their compose was deferred (their project's messages are slow, and
 * they waited past COMPOSE_WAIT_MS for a thread), so nothing reached the relay. They are QUEUED
 * again with a new job, which reserves them new send slots, spaced by their compose time
 * (composeSpacingMs), and this batch's poller is free for the next batch.
 */
async function giveBack(ctx: AppContext, emails: ClaimedEmail[], held: Map<string, ClaimedEmail>): Promise<void> {
  if (emails.length === 0) return;
  try {
    const released = await releaseClaims(ctx, emails, (client, ids) => ctx.jobs.sendMany(DELIVERY_QUEUE, deliveryJobs(ids), { client }));
    ctx.log.info({ projectId: emails[0].projectId, emails: released.length }, 'slow messages waited for a compose thread; queued them again');
  } finally {
    for (const email of emails) held.delete(email.id);
  }
}

/** One job's worth: used by tests and by callers that deliver a single email. */
export const deliverEmail = (ctx: AppContext, emailId: string) => deliverBatch(ctx, [{ emailIds: [emailId] }]);

/** sendOne's answer for an email whose compose was deferred: nothing was done, the caller gives it back. */
const DEFERRED = 'deferred';

/**
 * Checks, composes and sends one claimed email. Returns the accepted message for the caller to
 * record, or DEFERRED; records every other outcome itself.
 */
async function sendOne(
  ctx: AppContext,
  email: ClaimedEmail,
  content: StoredContent,
  contact: ContactRecord | null,
  project: ProjectForMail,
  state: { blocked: string | null; suppressed: boolean; senderOf: (fromEmail: string) => Promise<SenderDomain> },
): Promise<Accepted | typeof DEFERRED | null> {
  const refusal = state.blocked
    ? (['FAILED', state.blocked] as const)
    : state.suppressed
      ? (['SUPPRESSED', 'Address is suppressed in this project'] as const)
      : email.type !== 'TRANSACTIONAL' && (!contact || !contact.subscribed)
        ? (['SKIPPED', 'unsubscribed'] as const)
        : null;
  if (refusal) {
    await markNotSent(ctx, email, refusal[0], refusal[1]);
    logOutcome(ctx, email, refusal[0] === 'FAILED' ? 'failed' : refusal[0] === 'SUPPRESSED' ? 'suppressed' : 'skipped', refusal[1]);
    return null;
  }

  let composed;
  try {
    const sender = await state.senderOf(email.fromEmail);
    composed = await composeMessage(ctx, email, content, contact, sender, project);
  } catch (err) {
    if (err instanceof ComposeDeferredError) return DEFERRED;
    const known =
      err instanceof RenderLimitError || err instanceof TemplateSyntaxError || err instanceof TemplateRenderError || err instanceof SenderNotVerifiedError;
    if (!known) ctx.log.error({ error: loggableError(err), emailId: email.id }, 'composing an email failed');
    await markNotSent(ctx, email, 'FAILED', known ? (err as Error).message : 'The message could not be built');
    logOutcome(ctx, email, 'failed', known ? (err as Error).message : 'The message could not be built');
    return null;
  }

  // No hand-off mark is written before the final dot: a SIGKILL between the mark and the dot lost
  // messages in the kill-a-worker test (decisions.md § Sending and delivery).
  const outcome = await ctx.mailer.send(composed.raw, { from: email.fromEmail, to: email.toEmail });
  switch (outcome.kind) {
    case 'accepted':
      logOutcome(
        ctx,
        email,
        ctx.mailer.mode === 'capture' ? 'delivered' : 'sent',
        ctx.mailer.mode === 'capture' ? 'captured (SMTP_URL is not set)' : outcome.response,
      );
      return { email, ...composed, at: ctx.clock.now() };
    case 'rejected':
      await recordBounce(ctx, email, { type: 'Permanent', diagnostic: outcome.response, subject: composed.subject });
      logOutcome(ctx, email, 'bounced', outcome.response);
      return null;
    case 'failed':
      await markNotSent(ctx, email, 'FAILED', outcome.response);
      logOutcome(ctx, email, 'failed', outcome.response);
      return null;
    case 'transient': {
      if (email.attempts >= ctx.config.deliveryMaxAttempts) {
        await markNotSent(ctx, email, 'FAILED', `Gave up after ${email.attempts} attempts: ${outcome.response}`);
        logOutcome(ctx, email, 'failed', `Gave up after ${email.attempts} attempts: ${outcome.response}`);
      } else {
        const delay = Math.min(ctx.config.deliveryRetryBaseSeconds * 4 ** (email.attempts - 1), MAX_BACKOFF_SECONDS);
        const retryAt = new Date(Date.now() + delay * 1000);
        await markForRetry(ctx, email, outcome.response, (client) =>
          ctx.jobs.send(DELIVERY_QUEUE, { emailIds: [email.id] } satisfies DeliveryPayload, { client, startAfter: retryAt }).then(() => {}),
        );
        logOutcome(ctx, email, 'retrying', `${outcome.response} (retry in ${delay} s)`);
      }
      return null;
    }
  }
}

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) out.set(key(item), [...(out.get(key(item)) ?? []), item]);
  return out;
}

export const deliveryQueue: QueueDef<DeliveryPayload> = {
  name: DELIVERY_QUEUE,
  schema: deliveryPayload,
  handler: (ctx, data) => deliverBatch(ctx, [data]),
  batchHandler: (ctx, items) =>
    deliverBatch(
      ctx,
      items.map((i) => i.data),
    ),
  // A fetch takes jobs until they name 100 emails: one job of a campaign batch, or up to 100 jobs of one email.
  batchSize: DELIVERY_JOB_EMAILS,
  jobWeight: DELIVERY_JOB_WEIGHT,
  workers: 4,
  retryLimit: 10,
  retryDelaySeconds: 10,
  expireInSeconds: 600,
};
