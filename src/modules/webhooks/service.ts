import { eq, lt } from 'drizzle-orm';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { snsMessages } from '../../db/schema/notifications.ts';
import { ApiError, badRequest } from '../../http/errors.ts';
import { assertJsonShape } from '../../http/json-shape.ts';
import { parse } from '../../http/validate.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { applySesEvent, sesEventSchema } from './ses.ts';
import { type CertificateSource, confirmSubscription, snsMessageSchema, verifySnsMessage } from './sns.ts';

export type NotificationResult = { status: 'processed' | 'duplicate' | 'ignored' | 'confirmed' };

/** SNS bodies arrive as text/plain JSON (or application/json when relayed); counted as JSON bodies are. */
function bodyObject(body: unknown): unknown {
  if (typeof body !== 'string') return body;
  assertJsonShape(Buffer.from(body, 'utf8'));
  try {
    return JSON.parse(body);
  } catch {
    throw new ApiError(400, 'INVALID_JSON', 'Request body is not valid JSON');
  }
}

/** SNS retries an HTTP(S) delivery for at most 3,600 s in all; its clock and ours may differ a little. */
const MAX_AGE_MS = 60 * 60_000;
const MAX_AHEAD_MS = 5 * 60_000;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * 400 unless the (signed) Timestamp is a date-time from the last hour, or at most 5 minutes ahead:
 * an older message is no delivery or retry of SNS's but a replay of one a third party kept.
 */
function assertRecent(ctx: AppContext, timestamp: string): void {
  const at = ISO_DATE_TIME.test(timestamp) ? Date.parse(timestamp) : Number.NaN;
  if (Number.isNaN(at)) throw badRequest('The SNS message Timestamp is not an ISO 8601 date-time', { timestamp });
  const now = ctx.clock.now().getTime();
  if (at < now - MAX_AGE_MS) throw badRequest('The SNS message is more than an hour old: SNS retries for an hour at most', { timestamp });
  if (at > now + MAX_AHEAD_MS) throw badRequest('The SNS message Timestamp is more than 5 minutes in the future', { timestamp });
}

/**
 * POST /webhooks/notifications: accept only the topics in SNS_TOPIC_ARNS and verify the SNS
 * signature (403 otherwise, nothing changes), refuse messages whose Timestamp is over an hour old or
 * over 5 minutes ahead (400, nothing changes), confirm subscriptions to those topics, and apply SES notifications exactly once per SNS MessageId. The MessageId is
 * claimed before the work and released if the work fails, so SNS's retry can do it again.
 */
export async function handleNotification(ctx: AppContext, certs: CertificateSource, body: unknown): Promise<NotificationResult> {
  if (ctx.config.snsTopicArns.length === 0) {
    throw new ApiError(403, 'FORBIDDEN', 'SNS notifications are not accepted: set SNS_TOPIC_ARNS to the topics Herald may receive');
  }
  const message = parse(snsMessageSchema, bodyObject(body));
  // Before the signature: anyone can get a validly signed message from a topic of their own.
  if (!ctx.config.snsTopicArns.includes(message.TopicArn)) {
    throw new ApiError(403, 'FORBIDDEN', 'This SNS topic is not listed in SNS_TOPIC_ARNS');
  }
  await verifySnsMessage(message, certs);
  assertRecent(ctx, message.Timestamp);

  if (message.Type === 'SubscriptionConfirmation') {
    await confirmSubscription(message);
    ctx.log.info({ topicArn: message.TopicArn }, 'SNS subscription confirmed');
    return { status: 'confirmed' };
  }
  if (message.Type !== 'Notification') return { status: 'ignored' };

  const claimed = await ctx.database.db
    .insert(snsMessages)
    .values({ messageId: message.MessageId, type: message.Type, receivedAt: ctx.clock.now() })
    .onConflictDoNothing()
    .returning({ messageId: snsMessages.messageId });
  if (claimed.length === 0) return { status: 'duplicate' };

  try {
    let event: unknown;
    try {
      event = JSON.parse(message.Message);
    } catch {
      return { status: 'ignored' };
    }
    const ses = sesEventSchema.safeParse(event);
    if (!ses.success) return { status: 'ignored' };
    return { status: await applySesEvent(ctx, ses.data) };
  } catch (err) {
    await ctx.database.db
      .delete(snsMessages)
      .where(eq(snsMessages.messageId, message.MessageId))
      .catch(() => {});
    throw err;
  }
}

/** SNS redelivers for hours at most: processed ids are kept for 30 days. */
const RETENTION_DAYS = 30;

export async function purgeProcessedNotifications(ctx: AppContext): Promise<void> {
  const before = new Date(ctx.clock.now().getTime() - RETENTION_DAYS * 86_400_000);
  await ctx.database.db.delete(snsMessages).where(lt(snsMessages.receivedAt, before));
}

const empty = z.object({}).passthrough();

export const notificationCleanupQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'sns-messages-cleanup',
  schema: empty,
  cron: '41 4 * * *',
  retryLimit: 1,
  handler: (ctx) => purgeProcessedNotifications(ctx),
};
