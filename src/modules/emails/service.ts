import { and, desc, eq, sql, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { UUID } from '../../db/ids.ts';
import { emails } from '../../db/schema/emails.ts';
import { afterCursor, cursorPage } from '../../http/keyset.ts';
import { ApiError, notFound } from '../../http/errors.ts';
import { type RawSource, rawSourceSize, rawSourceStream } from './raw-source.ts';
import { emailSourceCleared } from './retention.ts';
import type { EmailRecord } from './schemas.ts';
import { sumCounter } from '../../db/counter-rows.ts';

type EmailRow = typeof emails.$inferSelect;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toEmailRecord(e: EmailRow): EmailRecord {
  return {
    id: e.id,
    projectId: e.projectId,
    contactId: e.contactId,
    to: e.toEmail,
    toName: e.toName,
    from: e.fromEmail,
    fromName: e.fromName,
    replyTo: e.replyTo,
    subject: e.subject ?? e.subjectSource,
    type: e.type,
    status: e.status,
    error: e.error,
    templateId: e.templateId,
    campaignId: e.campaignId,
    workflowId: e.workflowId,
    messageId: e.messageId,
    attempts: e.attempts,
    openCount: e.openCount,
    clickCount: e.clickCount,
    sentAt: iso(e.sentAt),
    deliveredAt: iso(e.deliveredAt),
    openedAt: iso(e.openedAt),
    clickedAt: iso(e.clickedAt),
    bouncedAt: iso(e.bouncedAt),
    complainedAt: iso(e.complainedAt),
    createdAt: e.createdAt.toISOString(),
    updatedAt: e.updatedAt.toISOString(),
  };
}

export async function getEmail(ctx: AppContext, projectId: string, id: string): Promise<EmailRecord> {
  if (!UUID.test(id)) throw notFound('email', id);
  const [row] = await ctx.database.db
    .select()
    .from(emails)
    .where(and(eq(emails.projectId, projectId), eq(emails.id, id)));
  if (!row) throw notFound('email', id);
  return toEmailRecord(row);
}

/**
 * The captured RFC 5322 source, to be streamed (raw-source.ts); 404 when the email was not captured
 * (delivered through SMTP, or not yet sent). A 429 past RAW_DOWNLOADS_PER_PROJECT (or _PER_PROCESS)
 * downloads under way: the slot is held until the returned stream closes.
 */
export async function getRawEmail(ctx: AppContext, projectId: string, id: string): Promise<RawSource> {
  const release = ctx.rawDownloads.take(projectId);
  try {
    await getEmail(ctx, projectId, id);
    const size = await rawSourceSize(ctx, id);
    if (size === null && (await emailSourceCleared(ctx, id))) {
      throw new ApiError(410, 'EMAIL_SOURCE_EXPIRED', 'The stored source of this email was cleared (EMAIL_CONTENT_RETENTION_DAYS)', {
        details: { resource: 'email', id },
      });
    }
    if (size === null) {
      throw new ApiError(404, 'EMAIL_NOT_FOUND', 'No captured source for this email (not sent yet, or delivered through SMTP)', {
        details: { resource: 'email', id },
      });
    }
    return { size, stream: rawSourceStream(ctx, id, size, release) };
  } catch (err) {
    release();
    throw err;
  }
}

/** Emails of one contact or campaign, counted from their index. */
const countWhere = async (ctx: AppContext, where: SQL) =>
  (
    await ctx.database.db
      .select({ n: sql<number>`count(*)::int` })
      .from(emails)
      .where(where)
  )[0].n;

/**
 * Every email of the project, or those of one status, from the counters in email_counts
 * (db/schema/emails.ts), which triggers on `emails` keep in the statements that write emails
 * (migration 0018): a few rows per status however many emails there are.
 */
const countEmails = (ctx: AppContext, projectId: string, status: string | undefined): Promise<number> =>
  sumCounter(ctx.database.db, 'email_counts', sql`project_id = ${projectId}${status === undefined ? sql`` : sql` AND status = ${status}`}`);

export type EmailListQuery = { limit: number; cursor?: string; contactId?: string; campaignId?: string; status?: string };

/** Newest first, keyset-paginated on (created_at, id). */
export async function listEmails(ctx: AppContext, projectId: string, q: EmailListQuery) {
  const filters: SQL[] = [eq(emails.projectId, projectId)];
  if (q.contactId) filters.push(eq(emails.contactId, q.contactId));
  if (q.campaignId) filters.push(UUID.test(q.campaignId) ? eq(emails.campaignId, q.campaignId) : sql`false`);
  if (q.status) filters.push(eq(emails.status, q.status as EmailRow['status']));
  const where = and(...filters)!;
  const rows = await ctx.database.db
    .select()
    .from(emails)
    .where(
      and(
        where,
        afterCursor(q.cursor, emails.createdAt, emails.id, (id) => UUID.test(id)),
      ),
    )
    .orderBy(desc(emails.createdAt), desc(emails.id))
    .limit(q.limit + 1);
  const total = q.cursor ? 0 : q.contactId || q.campaignId ? await countWhere(ctx, where) : await countEmails(ctx, projectId, q.status);
  return { ...cursorPage(rows, q.limit, (e) => [e.createdAt, e.id], toEmailRecord), total };
}
