import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { assertWithinBillingLimit } from '../billing/limits.ts';
import type { EmailStatus } from '../../db/schema/emails.ts';
import { upsertContact } from '../contacts/service.ts';
import { senderDomainFor } from '../domains/sender.ts';
import { DELIVERY_QUEUE } from '../emails/delivery/queue-name.ts';
import { queueEmailsWithStatus } from '../emails/queue.ts';
import { campaignRow } from './service.ts';

export type TestSendResult = { id: string; to: string; subject: string; status: EmailStatus };

/**
 * POST /campaigns/:id/test: the campaign's content to one address, rendered for that address's
 * contact (upserted as /v1/send does: a new contact is unsubscribed). It is sent as TRANSACTIONAL so
 * it arrives whatever the subscription state (suppressed addresses still get nothing), with
 * `[Test] ` before the subject, and belongs to no campaign, so it never counts in the stats. It is
 * a transactional email of the month's usage, refused past the project's transactional cap as a
 * /v1/send is (403 BILLING_LIMIT_EXCEEDED, nothing written). It is fetched for delivery as it
 * commits (jobs/commit-wakes.ts).
 */
export async function sendTestEmail(ctx: AppContext, projectId: string, id: string, to: string): Promise<TestSendResult> {
  const campaign = await campaignRow(ctx.database.db, projectId, id);
  await senderDomainFor(ctx, projectId, campaign.fromEmail);
  const now = ctx.clock.now();
  const subject = `[Test] ${campaign.subject}`;
  const result = await withTransaction(ctx.database, async (t) => {
    await assertWithinBillingLimit(ctx, t, projectId, 'transactional', 1);
    const { contact } = await upsertContact(t.tx, projectId, { email: to }, { defaultSubscribed: false, now });
    const [queued] = await queueEmailsWithStatus(ctx, t, [
      {
        projectId,
        contactId: contact.id,
        to: { email: contact.email },
        from: { email: campaign.fromEmail, name: campaign.fromName },
        replyTo: campaign.replyTo,
        type: 'TRANSACTIONAL',
        subjectSource: subject,
        content: { bodySource: campaign.body },
        campaignId: null,
        status: 'QUEUED',
        checkSuppression: true,
      },
    ]);
    return { id: queued.id, to: contact.email, subject, status: queued.status };
  });
  ctx.jobs.wake(DELIVERY_QUEUE);
  return result;
}
