import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { clientOf } from '../../db/prepared.ts';
import type { EmailStatus, EmailType, StoredAttachment } from '../../db/schema/emails.ts';
import { DELIVERY_QUEUE } from './delivery/queue-name.ts';
import { deliveryJobs } from './delivery/job.ts';

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
 * The contents and the emails of a batch in one named statement (planned once per connection, not
 * on every send group): $1 the content rows and $2 the email rows as JSON, $3 the time, $4 the
 * error of a suppressed email.
 */
const QUEUE_EMAILS_SQL = {
  name: 'herald_queue_emails_v1',
  text: `
    WITH contents AS (
      INSERT INTO email_contents (id, project_id, body_source, variables, headers, attachments, created_at)
      SELECT c.id, c.project_id, c.body_source, c.variables, c.headers, c.attachments, $3::timestamptz
        FROM jsonb_to_recordset($1::jsonb)
          AS c(id uuid, project_id text, body_source text, variables jsonb, headers jsonb, attachments jsonb)
    )
    INSERT INTO emails (id, project_id, contact_id, to_email, to_name, from_email, from_name, reply_to, type, subject_source,
                        content_id, template_id, campaign_id, workflow_id, status, error, created_at, updated_at)
    SELECT r.id, r.project_id, r.contact_id, r.to_email, r.to_name, r.from_email, r.from_name, r.reply_to, r.type, r.subject_source,
           r.content_id, r.template_id, r.campaign_id, r.workflow_id,
           CASE WHEN x.suppressed THEN 'SUPPRESSED' ELSE r.status END,
           CASE WHEN x.suppressed THEN $4::text ELSE r.error END,
           $3::timestamptz, $3::timestamptz
      FROM jsonb_to_recordset($2::jsonb)
        AS r(id uuid, project_id text, contact_id text, to_email text, to_name text, from_email text, from_name text, reply_to text,
             type text, subject_source text, content_id uuid, template_id uuid, campaign_id uuid, workflow_id uuid, status text,
             error text, suppression_email text)
     CROSS JOIN LATERAL (
       SELECT r.suppression_email IS NOT NULL
              AND EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = r.project_id AND s.email = r.suppression_email) AS suppressed
     ) AS x
    RETURNING id, status`,
} as const;

/**
 * Writes email rows, their shared content rows and their delivery jobs in the caller's transaction:
 * send, campaigns and workflows all queue mail through here, so an email exists exactly when its
 * job does, and a content is stored once however many emails of the batch carry it.
 */
export async function queueEmails(ctx: AppContext, t: { tx: Db; client: pg.PoolClient }, batch: NewEmail[], at?: Date): Promise<string[]> {
  return (await queueEmailsWithStatus(ctx, t, batch, at)).map((e) => e.id);
}

/**
 * As queueEmails, with each email's final status (SUPPRESSED where `checkSuppression` found the address).
 * Their `created_at` is `now` (a campaign's fan-out keeps the window of its batches).
 * One statement writes the contents and the emails (rows passed as JSON: a batch of hundreds costs
 * one parse and plan, not one sub-plan per row), a second the delivery jobs (one a hundred emails).
 */
export async function queueEmailsWithStatus(
  ctx: AppContext,
  t: { tx: Db; client: pg.PoolClient },
  batch: NewEmail[],
  now: Date = ctx.clock.now(),
): Promise<QueuedEmail[]> {
  if (batch.length === 0) return [];
  const iso = now.toISOString();
  const contentIds = new Map<EmailContent, string>();
  const contentRows: Record<string, unknown>[] = [];
  for (const e of batch) {
    if (contentIds.has(e.content)) continue;
    const id = uuidv7(now.getTime());
    contentIds.set(e.content, id);
    contentRows.push({
      id,
      project_id: e.projectId,
      body_source: e.content.bodySource,
      variables: e.content.variables ?? {},
      headers: e.content.headers ?? {},
      attachments: e.content.attachments ?? null,
    });
  }
  const rows = batch.map((e) => ({
    id: uuidv7(now.getTime()),
    project_id: e.projectId,
    contact_id: e.contactId,
    to_email: e.to.email,
    to_name: e.to.name ?? null,
    from_email: e.from.email,
    from_name: e.from.name ?? null,
    reply_to: e.replyTo ?? null,
    type: e.type,
    subject_source: e.subjectSource,
    content_id: contentIds.get(e.content)!,
    template_id: e.templateId ?? null,
    campaign_id: e.campaignId ?? null,
    workflow_id: e.workflowId ?? null,
    status: e.status,
    error: e.error ?? null,
    // The address looked up in the project's suppressions, when the caller asks for the check.
    suppression_email: e.checkSuppression ? e.to.email.toLowerCase() : null,
  }));
  const { rows: inserted } = await clientOf(t.tx).query<{ id: string; status: QueuedEmail['status'] }>({
    ...QUEUE_EMAILS_SQL,
    values: [JSON.stringify(contentRows), JSON.stringify(rows), iso, SUPPRESSED_ERROR],
  });
  const statusById = new Map(inserted.map((r) => [r.id, r.status]));
  const queued = rows.map((r) => ({ id: r.id, status: statusById.get(r.id)! }));
  const jobs = deliveryJobs(queued.filter((r) => r.status === 'QUEUED').map((r) => r.id));
  await ctx.jobs.sendMany(DELIVERY_QUEUE, jobs, { client: t.client });
  return queued;
}
