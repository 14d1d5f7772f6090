import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { type EmailStatus, type EmailType, type StoredAttachment, emails } from '../../db/schema/emails.ts';
import { DELIVERY_QUEUE } from './delivery/queue-name.ts';

export type NewEmail = {
  projectId: string;
  contactId: string | null;
  to: { email: string; name?: string | null };
  from: { email: string; name?: string | null };
  replyTo?: string | null;
  type: EmailType;
  subjectSource: string;
  bodySource: string;
  variables?: Record<string, unknown>;
  headers?: Record<string, string>;
  attachments?: StoredAttachment[] | null;
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
 * Writes email rows and their delivery jobs in the caller's transaction: send, campaigns and
 * workflows all queue mail through here, so an email exists exactly when its job does.
 */
export async function queueEmails(ctx: AppContext, t: { tx: Db; client: pg.PoolClient }, batch: NewEmail[]): Promise<string[]> {
  return (await queueEmailsWithStatus(ctx, t, batch)).map((e) => e.id);
}

/** As queueEmails, with each email's final status (SUPPRESSED where `checkSuppression` found the address). */
export async function queueEmailsWithStatus(ctx: AppContext, t: { tx: Db; client: pg.PoolClient }, batch: NewEmail[]): Promise<QueuedEmail[]> {
  if (batch.length === 0) return [];
  const now = ctx.clock.now();
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
    bodySource: e.bodySource,
    variables: e.variables ?? {},
    headers: e.headers ?? {},
    attachments: e.attachments ?? null,
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
  const jobs = queued.filter((r) => r.status === 'QUEUED').map((r) => ({ name: DELIVERY_QUEUE, data: { emailId: r.id } }));
  if (jobs.length > 0) {
    await ctx.jobs.boss.insert(jobs, { db: { executeSql: (text, values) => t.client.query(text, values) } });
  }
  return queued;
}

const ifSuppressed = (e: NewEmail, then: SQL, otherwise: SQL) =>
  sql`CASE WHEN EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = ${e.projectId} AND s.email = ${e.to.email.toLowerCase()}) THEN ${then} ELSE ${otherwise} END`;
