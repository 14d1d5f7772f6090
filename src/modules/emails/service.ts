import { and, desc, eq, sql, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { hasMoreThan } from '../../db/more-than.ts';
import { boundedHeavyReadWhen } from '../../http/heavy-reads.ts';
import { UUID } from '../../db/ids.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { emails } from '../../db/schema/emails.ts';
import { afterCursor, cursorPage } from '../../http/keyset.ts';
import { ApiError, notFound } from '../../http/errors.ts';
import { type RawSource, rawSourceSize, rawSourceStream } from './raw-source.ts';
import { emailSourceCleared } from './retention.ts';
import type { EmailRecord } from './schemas.ts';
import { isoUs } from '../contacts/sql.ts';
import { rowsWalkedFor, sumCounterPart } from '../../db/counter-rows.ts';

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
const countWhere = async (db: Db, where: SQL) =>
  (
    await db
      .select({ n: sql<number>`count(*)::int` })
      .from(emails)
      .where(where)
  )[0].n;

/**
 * Every email of the project, and those of one status, from the counters in email_counts
 * (db/schema/emails.ts), which triggers on `emails` keep in the statements that write emails
 * (migration 0018): a few rows per status however many emails there are.
 */
const countEmails = (db: Db, projectId: string, status: string | undefined): Promise<{ all: number; matching: number }> =>
  sumCounterPart(db, 'email_counts', sql`project_id = ${projectId}`, status === undefined ? undefined : sql`status = ${status}`);

export type EmailListQuery = { limit: number; cursor?: string; contactId?: string; campaignId?: string; status?: string };

/**
 * A list reads at most about this many emails at once: past it (a contact's or a campaign's
 * emails, or the project's walked for a rare status), it is a heavy read.
 */
export const EMAILS_LISTED_AT_ONCE = 10_000;

/** How long one statement of a heavy emails list may run: past it, a 503. */
export const EMAILS_READ_STATEMENT_MS = 10_000;

/** The statuses whose page reads their own entries in `emails_project_rare_status_idx`. */
const INDEXED_STATUSES: ReadonlySet<string> = new Set(['BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED']);

const filtersOf = (projectId: string, q: EmailListQuery): SQL => {
  const filters: SQL[] = [eq(emails.projectId, projectId)];
  if (q.contactId) filters.push(eq(emails.contactId, q.contactId));
  if (q.campaignId) filters.push(UUID.test(q.campaignId) ? eq(emails.campaignId, q.campaignId) : sql`false`);
  if (q.status) filters.push(eq(emails.status, q.status as EmailRow['status']));
  return and(...filters)!;
};

/**
 * Whether a contact (else a campaign) has more than EMAILS_LISTED_AT_ONCE emails: its `total`
 * counts them all, and its page of one status walks them. Read from at most that many entries of
 * its index, in the index's order, so that the planner reads the index rather than the table (a
 * sequential scan whose LIMIT it expected to reach early read 1,000,000 other emails first).
 */
async function narrowedToMany(db: Db, projectId: string, q: EmailListQuery, campaignIsTheProjects: boolean): Promise<boolean> {
  const narrowing = q.contactId
    ? sql`${emails.contactId} = ${q.contactId} ORDER BY ${emails.createdAt} DESC, ${emails.id} DESC`
    : q.campaignId && UUID.test(q.campaignId)
      ? sql`${emails.campaignId} = ${q.campaignId} ORDER BY ${emails.status}`
      : undefined;
  // A campaign known to be the project's: its index entries alone, as its count (campaignWindowOf).
  const ofProject = campaignIsTheProjects ? sql`` : sql`${emails.projectId} = ${projectId} AND`;
  return narrowing !== undefined && hasMoreThan(db, sql`SELECT 1 FROM emails WHERE ${ofProject} ${narrowing}`, EMAILS_LISTED_AT_ONCE);
}

/**
 * About how many of the project's emails a page of a status without an index of its own walks:
 * the page's rows spread over all of them as the counters say (SENT and DELIVERED: with a relay
 * an email stays SENT, captured it is DELIVERED at once, so either may be rare; QUEUED and
 * SENDING are in the delivery's index of every project's waiting emails).
 */
const walkedFor = (q: EmailListQuery, counted: { all: number; matching: number }): number => (statusWalks(q) ? rowsWalkedFor(q.limit, counted) : 0);

/** A status without an index of its own: its page reads along the project's newest emails. */
const statusWalks = (q: EmailListQuery): boolean => q.status !== undefined && !INDEXED_STATUSES.has(q.status);

/**
 * What a campaign's emails list may read from its row: the window its fan-out wrote its emails in
 * (campaigns.emails_from/until), and, once SENT, their exact number (finalise counts them into
 * `total_recipients`; a campaign's emails are never deleted on their own). Undefined for a campaign
 * without a window (none written yet, sent before migration 0027, or not the project's).
 *
 * `counted`: the campaign's emails of the list's status, for its `total`. The campaign is the
 * project's, and so is each of its emails, so the count leaves the project out and reads
 * emails_campaign_idx (campaign_id, status) alone, without visiting the rows for their project:
 * one status of a campaign of 1,000,000 took 146–249 ms for 900,000 emails (now 29–35 once read)
 * and 129–189 ms for 90,000 (now 11–20).
 */
async function campaignWindowOf(db: Db, projectId: string, q: EmailListQuery): Promise<{ window: SQL; sent: number | undefined; counted: SQL } | undefined> {
  if (!q.campaignId || q.contactId || !UUID.test(q.campaignId)) return undefined;
  const [c] = await db
    .select({
      status: campaigns.status,
      totalRecipients: campaigns.totalRecipients,
      // Exact to the microsecond, as stored (a Date would round them off).
      from: sql<string | null>`${isoUs('emails_from')}`,
      until: sql<string | null>`${isoUs('emails_until')}`,
    })
    .from(campaigns)
    .where(and(eq(campaigns.projectId, projectId), eq(campaigns.id, q.campaignId)));
  if (!c?.from || !c.until) return undefined;
  const from = sql`${emails.createdAt} >= ${c.from}::timestamptz`;
  return {
    // After a cursor, its row comparison is the upper bound: with `until` as well, the index scan
    // started at `until` and read down to the cursor (43 ms for a last page of 1,000,000).
    window: q.cursor ? from : sql`${from} AND ${emails.createdAt} <= ${c.until}::timestamptz`,
    sent: c.status === 'SENT' && !q.status ? c.totalRecipients : undefined,
    counted: and(eq(emails.campaignId, q.campaignId), q.status ? eq(emails.status, q.status as EmailRow['status']) : undefined)!,
  };
}

/**
 * A page's statement (list-plans.test.ts reads its plan): along the project's (or the contact's)
 * newest emails, or a rare status's own index entries; a campaign's within its window. A 400 for a
 * cursor that is not one.
 */
export async function emailsPageQuery(db: Db, projectId: string, q: EmailListQuery) {
  const after = afterCursor(q.cursor, emails.createdAt, emails.id, (id) => UUID.test(id));
  // An old campaign's page reads the project's emails of its window, not every newer one.
  const campaign = await campaignWindowOf(db, projectId, q);
  const page = (db: Db) =>
    db
      .select()
      .from(emails)
      .where(and(filtersOf(projectId, q), after, campaign?.window))
      .orderBy(desc(emails.createdAt), desc(emails.id))
      .limit(q.limit + 1);
  return { campaign, page };
}

/**
 * Newest first, keyset-paginated on (created_at, id). The project's `total`, and a status's, come
 * from the counters (a first page of a status none of its emails has is answered from them
 * alone); a SENT campaign's from its row; a contact's, or another campaign's, from their index. A
 * list that may read more than EMAILS_LISTED_AT_ONCE emails is a heavy read (http/heavy-reads.ts:
 * the project's slots and time, a 429 past either; its statements bounded by
 * EMAILS_READ_STATEMENT_MS).
 */
export async function listEmails(ctx: AppContext, projectId: string, q: EmailListQuery) {
  const db = ctx.database.db;
  const { campaign, page } = await emailsPageQuery(db, projectId, q);
  const narrowed = Boolean(q.contactId || q.campaignId);
  // The counters answer a first page's total, and say how far a later page of a status without an index walks.
  const counted = narrowed || (q.cursor && !statusWalks(q)) ? undefined : await countEmails(db, projectId, q.status);
  if (!q.cursor && counted?.matching === 0) return { data: [], hasMore: false, total: 0 };
  const read = async (db: Db) => {
    const rows = await page(db);
    const total = q.cursor ? 0 : counted ? counted.matching : (campaign?.sent ?? (await countWhere(db, campaign?.counted ?? filtersOf(projectId, q))));
    return { ...cursorPage(rows, q.limit, (e) => [e.createdAt, e.id], toEmailRecord), total };
  };
  const heavy = narrowed
    ? await narrowedToMany(db, projectId, q, campaign !== undefined)
    : counted !== undefined && walkedFor(q, counted) > EMAILS_LISTED_AT_ONCE;
  return boundedHeavyReadWhen(heavy, ctx, projectId, { ms: EMAILS_READ_STATEMENT_MS, what: "Listing this project's emails" }, read);
}
