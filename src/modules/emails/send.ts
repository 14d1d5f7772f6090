import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { assertWithinBillingLimit } from '../billing/limits.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { validationError } from '../../http/errors.ts';
import { checkTemplates } from '../../render/engine.ts';
import { type UpsertResult, upsertContact } from '../contacts/service.ts';
import { scheduleSegmentReevaluation } from '../segments/membership.ts';
import { senderDomainFor } from '../domains/sender.ts';
import { getTemplate } from '../templates/service.ts';
import { splitCustomData } from '../contacts/custom-data.ts';
import { type EmailContent, type NewEmail, queueEmailsWithStatus } from './queue.ts';
import type { SendBody } from './schemas.ts';

export type SendResultItem = {
  contact: { id: string; email: string };
  email: string;
  status: NewEmail['status'];
};

type Address = { email: string; name?: string | null };

const toAddress = (a: string | { email: string; name?: string }): Address => (typeof a === 'string' ? { email: a } : a);

/** Whether a message of this type may go to the contact now (decisions.md § 5); suppression is checked by the insert. */
export function initialStatus(type: EmailType, subscribed: boolean): Pick<NewEmail, 'status' | 'error'> {
  if (type !== 'TRANSACTIONAL' && !subscribed) return { status: 'SKIPPED', error: 'unsubscribed' };
  return { status: 'QUEUED', error: null };
}

/**
 * POST /v1/send: resolves content and sender, then, in one transaction, upserts each recipient's
 * contact and queues one email per recipient. Rendering and delivery happen in the workers.
 */
export async function sendEmails(ctx: AppContext, projectId: string, body: SendBody): Promise<{ emails: SendResultItem[]; timestamp: string }> {
  const template = body.template ? await getTemplate(ctx.database.db, projectId, body.template) : null;
  const subjectSource = body.subject ?? template?.subject;
  const bodySource = body.body ?? template?.body;
  if (subjectSource === undefined || bodySource === undefined) {
    throw validationError([{ field: 'template', code: 'custom', message: 'Give a template or both subject and body' }]);
  }
  const from = resolveFrom(body, template);
  if (!from) {
    throw validationError([{ field: 'from', code: 'invalid_type', message: 'from is required unless the template has one', received: 'undefined' }]);
  }
  await senderDomainFor(ctx, projectId, from.email);
  const syntax = checkTemplates({ subject: body.subject, body: body.body });
  if (syntax.length > 0) throw validationError(syntax);

  const type: EmailType = template?.type ?? 'TRANSACTIONAL';
  const recipients = (Array.isArray(body.to) ? body.to : [body.to]).map(toAddress);
  const stored = splitCustomData(body.data);
  assertStoredDataBound(stored.set, new Set(recipients.map((r) => r.email)).size);
  const now = ctx.clock.now();
  // One content for every recipient of the request (stored once): the one-off variables come from
  // the request's `data` alone, the same for each contact.
  const content: EmailContent = {
    bodySource,
    variables: stored.oneOff,
    headers: body.headers,
    attachments: body.attachments,
  };

  return withTransaction(ctx.database, async (t) => {
    await assertWithinBillingLimit(ctx, t, projectId, 'transactional', recipients.length);
    const items: Pick<SendResultItem, 'contact'>[] = [];
    const batch: NewEmail[] = [];
    // Contacts are upserted in email order, so concurrent multi-recipient sends lock rows in one
    // order and cannot deadlock; emails and the response keep the request's order.
    const contacts = new Map<string, UpsertResult>();
    for (const address of [...new Set(recipients.map((r) => r.email))].sort()) {
      const result = await upsertContact(t.tx, projectId, { email: address, subscribed: body.subscribed, data: body.data }, { defaultSubscribed: false, now });
      contacts.set(address, result);
      if (result.isNew || result.isUpdate) await scheduleSegmentReevaluation(ctx, projectId, result.contact.id, t.client);
    }
    for (const to of recipients) {
      const { contact } = contacts.get(to.email)!;
      items.push({ contact: { id: contact.id, email: contact.email } });
      batch.push({
        projectId,
        contactId: contact.id,
        to: { email: contact.email, name: to.name },
        from,
        replyTo: body.reply ?? template?.replyTo ?? null,
        type,
        subjectSource,
        content,
        templateId: template?.id ?? null,
        ...initialStatus(type, contact.subscribed),
        checkSuppression: true,
      });
    }
    const queued = await queueEmailsWithStatus(ctx, t, batch);
    return { emails: items.map((item, i) => ({ ...item, email: queued[i].id, status: queued[i].status })), timestamp: now.toISOString() };
  });
}

/** Persistent `data` is written to every recipient's contact: at most this much in all per request. */
export const MAX_STORED_DATA_BYTES = 2 * 1024 * 1024;

/**
 * Persistent `data` is stored on each recipient's contact (one-off values once, with the content):
 * its size times the recipients stays within MAX_STORED_DATA_BYTES, so what a request stores stays
 * proportional to what it sent. One recipient can always use the whole `data` cap.
 */
function assertStoredDataBound(persistent: Record<string, unknown>, recipients: number): void {
  if (recipients <= 1) return;
  const bytes = Buffer.byteLength(JSON.stringify(persistent));
  if (bytes * recipients <= MAX_STORED_DATA_BYTES) return;
  throw validationError([
    {
      field: 'data',
      code: 'too_big',
      message: `data stored on ${recipients} contacts would take ${Math.ceil((bytes * recipients) / 1024)} KB (at most ${MAX_STORED_DATA_BYTES / 1024 / 1024} MB per request): send large values as one-off ({ "value": …, "persistent": false }) or to fewer recipients`,
    },
  ]);
}

function resolveFrom(body: SendBody, template: { from: string; fromName: string | null } | null): Address | null {
  if (typeof body.from === 'string') return { email: body.from, name: body.name ?? null };
  if (body.from) return { email: body.from.email, name: body.from.name ?? body.name ?? null };
  if (template) return { email: template.from, name: template.fromName };
  return null;
}
