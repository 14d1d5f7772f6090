import type { AppContext } from '../../context.ts';
import { type Tx, withTransaction } from '../../db/client.ts';
import { assertWithinBillingLimit } from '../billing/limits.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { validationError } from '../../http/errors.ts';
import { checkTemplateSources } from '../../render/template-check.ts';
import { type UpsertResult, upsertContact } from '../contacts/service.ts';
import { upsertContacts } from '../contacts/upsert-many.ts';
import { WRITE_GROUP_LIMITS } from '../../db/write-groups.ts';
import { normaliseEmail } from '../contacts/schemas.ts';
import { scheduleSegmentReevaluation } from '../segments/membership.ts';
import { senderDomainFor } from '../domains/sender.ts';
import { getTemplate } from '../templates/service.ts';
import { splitCustomData } from '../contacts/custom-data.ts';
import { DELIVERY_QUEUE } from './delivery/queue-name.ts';
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

/** A send request checked and resolved (content, sender, recipients), before any transaction. */
export type PreparedSend = {
  projectId: string;
  body: SendBody;
  template: { id: string; replyTo: string | null } | null;
  type: EmailType;
  from: Address;
  subjectSource: string;
  content: EmailContent;
  recipients: Address[];
  /** The distinct recipient addresses, sorted: contacts are upserted in this order. */
  contactEmails: string[];
  now: Date;
};

/**
 * POST /v1/send, first half: resolves content and sender and checks everything that needs no
 * transaction. Rendering and delivery happen in the workers.
 */
export async function prepareSend(ctx: AppContext, projectId: string, body: SendBody): Promise<PreparedSend> {
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
  const syntax = await checkTemplateSources(ctx.threads.compose, { subject: body.subject, body: body.body });
  if (syntax.length > 0) throw validationError(syntax);

  const recipients = (Array.isArray(body.to) ? body.to : [body.to]).map(toAddress);
  const contactEmails = [...new Set(recipients.map((r) => r.email))].sort();
  const stored = splitCustomData(body.data);
  assertStoredDataBound(stored.set, contactEmails.length);
  return {
    projectId,
    body,
    template: template ? { id: template.id, replyTo: template.replyTo } : null,
    type: template?.type ?? 'TRANSACTIONAL',
    from,
    subjectSource,
    // One content for every recipient of the request (stored once): the one-off variables come from
    // the request's `data` alone, the same for each contact.
    content: { bodySource, variables: stored.oneOff, headers: body.headers, attachments: body.attachments },
    recipients,
    contactEmails,
    now: ctx.clock.now(),
  };
}

/** Two sends sharing a recipient never share a group (one statement cannot write a contact twice). */
export const sendContactKeys = (s: PreparedSend): string[] => s.contactEmails.map(normaliseEmail);

/** A send's share of a group: one per recipient; with attachments it is sent alone (its body may be megabytes). */
export const sendGroupSize = (s: PreparedSend): number => (s.content.attachments?.length ? WRITE_GROUP_LIMITS.maxSize : s.recipients.length);

/** POST /v1/send in one transaction: upserts each recipient's contact and queues one email per recipient; then wakes a delivery poller of this process. */
export async function sendPrepared(ctx: AppContext, send: PreparedSend): Promise<SendResult> {
  const result = await withTransaction(ctx.database, async (t) => {
    await assertWithinBillingLimit(ctx, t, send.projectId, 'transactional', send.recipients.length);
    // Several recipients are upserted as a group's are (upsertContacts: the existing contacts
    // locked in email order, then the new ones inserted in email order), so a multi-recipient send
    // and a group lock rows in one order and cannot deadlock on contacts; one recipient takes the
    // one-contact statement, which costs PostgreSQL less. Emails and the response keep the
    // request's order.
    const addresses = send.contactEmails;
    const results =
      addresses.length === 1
        ? [await upsertContact(t.tx, send.projectId, contactInput(send, addresses[0]), { defaultSubscribed: false, now: send.now })]
        : await upsertContacts(
            t.tx,
            send.projectId,
            addresses.map((address) => ({ ...contactInput(send, address), now: send.now })),
            { defaultSubscribed: false },
          );
    const contacts = new Map<string, UpsertResult>(addresses.map((address, i) => [address, results[i]]));
    return (await queueSends(ctx, t, [send], [contacts]))[0];
  });
  ctx.jobs.wake(DELIVERY_QUEUE);
  return result;
}

/**
 * Many sends of one project (no recipient in two of them) in one transaction, with the same
 * effects as `sendPrepared` for each: one billing check for them all, one statement upserting
 * every contact, one writing every email.
 */
export async function sendMany(ctx: AppContext, projectId: string, sends: PreparedSend[]): Promise<SendResult[]> {
  const results = await withTransaction(ctx.database, async (t) => {
    await assertWithinBillingLimit(
      ctx,
      t,
      projectId,
      'transactional',
      sends.reduce((n, s) => n + s.recipients.length, 0),
    );
    const inputs = sends.flatMap((send) => send.contactEmails.map((address) => ({ ...contactInput(send, address), now: send.now })));
    const upserted = await upsertContacts(t.tx, projectId, inputs, { defaultSubscribed: false });
    let next = 0;
    const contacts = sends.map((send) => new Map(send.contactEmails.map((address) => [address, upserted[next++]])));
    return queueSends(ctx, t, sends, contacts);
  });
  ctx.jobs.wake(DELIVERY_QUEUE);
  return results;
}

export type SendResult = { emails: SendResultItem[]; timestamp: string };

const contactInput = (send: PreparedSend, email: string) => ({ email, subscribed: send.body.subscribed, data: send.body.data });

/** The emails of `sends`, whose recipients' contacts are upserted: one statement queues them all. */
async function queueSends(ctx: AppContext, t: Tx, sends: PreparedSend[], contacts: Map<string, UpsertResult>[]): Promise<SendResult[]> {
  const batch: NewEmail[] = [];
  for (const [i, send] of sends.entries()) {
    for (const result of contacts[i].values()) {
      if (result.isNew || result.isUpdate) await scheduleSegmentReevaluation(ctx, send.projectId, result.contact.id, t.client);
    }
    for (const to of send.recipients) {
      const { contact } = contacts[i].get(to.email)!;
      batch.push({
        projectId: send.projectId,
        contactId: contact.id,
        to: { email: contact.email, name: to.name },
        from: send.from,
        replyTo: send.body.reply ?? send.template?.replyTo ?? null,
        type: send.type,
        subjectSource: send.subjectSource,
        content: send.content,
        templateId: send.template?.id ?? null,
        ...initialStatus(send.type, contact.subscribed),
        checkSuppression: true,
      });
    }
  }
  const queued = await queueEmailsWithStatus(ctx, t, batch);
  let next = 0;
  return sends.map((send, i) => ({
    emails: send.recipients.map((to) => {
      const { contact } = contacts[i].get(to.email)!;
      const email = queued[next++];
      return { contact: { id: contact.id, email: contact.email }, email: email.id, status: email.status };
    }),
    timestamp: send.now.toISOString(),
  }));
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
  // The deprecated `name` names a plain-address `from` only (api-spec § POST /v1/send).
  if (body.from) return { email: body.from.email, name: body.from.name ?? null };
  if (template) return { email: template.from, name: template.fromName };
  return null;
}
