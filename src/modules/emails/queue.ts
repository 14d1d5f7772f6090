import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { type EmailStatus, type EmailType, type StoredAttachment, emailContents, emails } from '../../db/schema/emails.ts';
import { DELIVERY_QUEUE } from './delivery/queue-name.ts';

/**
 * What several emails may share (stored once in email_contents): emails of one batch that carry the
 * same EmailContent object share one row, so a caller shares content by passing one object.
 */
export type EmailContent = {
  bodySource: string;
  /** One-off variables (not stored on the contact). */
  variables?: Record<string, unknown>;
  headers?: Record<string, string>;
  attachments?: StoredAttachment[] | null;
};

export type NewEmail = {
  projectId: string;
  contactId: string | null;
  to: { email: string; name?: string | null };
  from: { email: string; name?: string | null };
  replyTo?: string | null;
  type: EmailType;
  subjectSource: string;
  content: EmailContent;
  templateId?: string | null;
  campaignId?: string | null;
  workflowId?: string | null;
  /** QUEUED emails get a delivery job; SKIPPED and SUPPRESSED ones are only recorded. */
  status: Extract<EmailStatus, 'QUEUED' | 'SKIPPED' | 'SUPPRESSED'>;
  error?: string | null;
  /** Turn the email SUPPRESSED when its address is suppressed in the project (checked in the INSERT itself). */
  checkSuppression?: boolean;
};

export type QueuedEmail = { id: string; status: NewEmail['status'] };

const SUPPRESSED_ERROR = 'Address is suppressed in this project';

/**
 * Writes email rows, their shared content rows and their delivery jobs in the caller's transaction:
 * send, campaigns and workflows all queue mail through here, so an email exists exactly when its
 * job does, and a content is stored once however many emails of the batch carry it.
 */
export async function queueEmails(ctx: AppContext, t: { tx: Db; client: pg.PoolClient }, batch: NewEmail[]): Promise<string[]> {
  return (await queueEmailsWithStatus(ctx, t, batch)).map((e) => e.id);
}

/** As queueEmails, with each email's final status (SUPPRESSED where `checkSuppression` found the address). */
export async function queueEmailsWithStatus(ctx: AppContext, t: { tx: Db; client: pg.PoolClient }, batch: NewEmail[]): Promise<QueuedEmail[]> {
  if (batch.length === 0) return [];
  const now = ctx.clock.now();
  const contentIds = new Map<EmailContent, string>();
  const contentRows: (typeof emailContents.$inferInsert)[] = [];
  for (const e of batch) {
    if (contentIds.has(e.content)) continue;
    const id = uuidv7(now.getTime());
    contentIds.set(e.content, id);
    contentRows.push({
      id,
      projectId: e.projectId,
      bodySource: e.content.bodySource,
      variables: e.content.variables ?? {},
      headers: e.content.headers ?? {},
      attachments: e.content.attachments ?? null,
      createdAt: now,
    });
  }
  await t.tx.insert(emailContents).values(contentRows);
  const rows = batch.map((e) => ({
    id: uuidv7(now.getTime()),
    projectId: e.projectId,
    contactId: e.contactId,
    toEmail: e.to.email,
    toName: e.to.name ?? null,
    fromEmail: e.from.email,
    fromName: e.from.name ?? null,
    replyTo: e.replyTo ?? null,
    type: e.type,
    subjectSource: e.subjectSource,
    contentId: contentIds.get(e.content)!,
    templateId: e.templateId ?? null,
    campaignId: e.campaignId ?? null,
    workflowId: e.workflowId ?? null,
    status: e.checkSuppression ? ifSuppressed(e, sql`'SUPPRESSED'`, sql`${e.status}`) : e.status,
    error: e.checkSuppression ? ifSuppressed(e, sql`${SUPPRESSED_ERROR}`, sql`${e.error ?? null}::text`) : (e.error ?? null),
    createdAt: now,
    updatedAt: now,
  }));
  const inserted = await t.tx.insert(emails).values(rows).returning({ id: emails.id, status: emails.status });
  const statusById = new Map(inserted.map((r) => [r.id, r.status as QueuedEmail['status']]));
  const queued = rows.map((r) => ({ id: r.id, status: statusById.get(r.id)! }));
  const jobs = queued.filter((r) => r.status === 'QUEUED').map((r) => ({ data: { emailId: r.id } }));
  await ctx.jobs.sendMany(DELIVERY_QUEUE, jobs, { client: t.client });
  return queued;
}

const ifSuppressed = (e: NewEmail, then: SQL, otherwise: SQL) =>
  sql`CASE WHEN EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = ${e.projectId} AND s.email = ${e.to.email.toLowerCase()}) THEN ${then} ELSE ${otherwise} END`;
