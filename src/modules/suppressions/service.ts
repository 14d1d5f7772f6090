import { and, desc, eq, ilike, sql, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { suppressions } from '../../db/schema/emails.ts';
import { afterCursor, cursorPage, firstPageTotal } from '../../http/keyset.ts';
import { notFound } from '../../http/errors.ts';
import { containsPattern } from '../../db/like.ts';
import { equalsAny } from '../../db/any.ts';
import { rowsWalkedFor, sumCounterPart } from '../../db/counter-rows.ts';
import { boundedHeavyReadWhen } from '../../http/heavy-reads.ts';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

export type SuppressionRecord = { email: string; reason: SuppressionReason; emailId: string | null; createdAt: string };

const normalise = (email: string) => email.trim().toLowerCase();

/** Suppresses an address in the project; the first reason recorded is kept. */
export async function suppressAddress(db: Db, projectId: string, email: string, reason: SuppressionReason, emailId: string | null, now: Date): Promise<void> {
  await db
    .insert(suppressions)
    .values({ projectId, email: normalise(email), reason, emailId, createdAt: now })
    .onConflictDoNothing();
}

type Row = typeof suppressions.$inferSelect;

const toRecord = (r: Row): SuppressionRecord => ({
  email: r.email,
  reason: r.reason as SuppressionReason,
  emailId: r.emailId,
  createdAt: r.createdAt.toISOString(),
});

export type SuppressionListQuery = { limit: number; cursor?: string; search?: string; reason?: SuppressionReason };

/**
 * A list reads at most about this many suppressions at once: past it (a reason so rare that its
 * page walks more of the project's newest), and for every search, it is a heavy read.
 */
export const SUPPRESSIONS_LISTED_AT_ONCE = 10_000;

/** How long one statement of a heavy suppressions list may run: past it, a 503. */
export const SUPPRESSIONS_READ_STATEMENT_MS = 10_000;

/**
 * Newest first, keyset-paginated on (created_at, email). `total` (first page only) comes from the
 * counters (migration 0031) unless a search narrows the list, and a first page of a reason none has
 * is answered from them alone. A search reads the trigram index on the address (db/search-index.ts)
 * and counts its matches; a term under three characters has no trigram and reads every suppression
 * of the project: so a search is a heavy read (http/heavy-reads.ts: the project's slots and time,
 * a 429 past either; its statements bounded by SUPPRESSIONS_READ_STATEMENT_MS), as is a reason's
 * page that would walk more than SUPPRESSIONS_LISTED_AT_ONCE of them (`(project_id, created_at)` is
 * the only index a page reads; the reason's rows spread over it as the counters say).
 */
export async function listSuppressions(ctx: AppContext, projectId: string, q: SuppressionListQuery) {
  const db = ctx.database.db;
  const term = q.search ?? '';
  const searching = term !== '';
  const filters: SQL[] = [eq(suppressions.projectId, projectId)];
  if (q.reason) filters.push(eq(suppressions.reason, q.reason));
  if (searching) filters.push(ilike(suppressions.email, containsPattern(term.trim().toLowerCase())));
  const where = and(...filters)!;
  const after = afterCursor(q.cursor, suppressions.createdAt, suppressions.email);
  const counted =
    searching || (q.cursor && !q.reason)
      ? undefined
      : await sumCounterPart(db, 'suppression_counts', sql`project_id = ${projectId}`, q.reason ? sql`reason = ${q.reason}` : undefined);
  if (!q.cursor && counted?.matching === 0) return { data: [], cursor: undefined, hasMore: false, total: 0 };
  const read = async (db: Db) => {
    const rows = await db
      .select()
      .from(suppressions)
      .where(and(where, after))
      .orderBy(desc(suppressions.createdAt), desc(suppressions.email))
      .limit(q.limit + 1);
    const countMatches = async () =>
      (
        await db
          .select({ n: sql<number>`count(*)::int` })
          .from(suppressions)
          .where(where)
      )[0].n;
    const total = q.cursor ? 0 : counted ? counted.matching : await firstPageTotal(rows.length, q.limit, countMatches);
    return { ...cursorPage(rows, q.limit, (r) => [r.createdAt, r.email], toRecord), total };
  };
  const walked = counted && q.reason ? rowsWalkedFor(q.limit, counted) : 0;
  const heavy = searching || walked > SUPPRESSIONS_LISTED_AT_ONCE;
  return boundedHeavyReadWhen(heavy, ctx, projectId, { ms: SUPPRESSIONS_READ_STATEMENT_MS, what: "Listing this project's suppressions" }, read);
}

/** The project's suppression of one address (compared lower-case), or a 404 when it is not suppressed. */
export async function getSuppression(ctx: AppContext, projectId: string, email: string): Promise<SuppressionRecord> {
  const [row] = await ctx.database.db
    .select()
    .from(suppressions)
    .where(and(eq(suppressions.projectId, projectId), eq(suppressions.email, normalise(email))));
  if (!row) throw notFound('suppression', normalise(email));
  return toRecord(row);
}

/** Lets mail reach the address again. The contact stays unsubscribed: re-subscribing is a separate, explicit step. */
export async function deleteSuppression(ctx: AppContext, projectId: string, email: string): Promise<void> {
  const deleted = await ctx.database.db
    .delete(suppressions)
    .where(and(eq(suppressions.projectId, projectId), eq(suppressions.email, normalise(email))))
    .returning({ email: suppressions.email });
  if (deleted.length === 0) throw notFound('suppression', normalise(email));
}

/** Which of these addresses are suppressed in the project (one query for a batch). */
export async function suppressedAmong(db: Db, projectId: string, addresses: string[]): Promise<Set<string>> {
  if (addresses.length === 0) return new Set();
  const rows = await db
    .select({ email: suppressions.email })
    .from(suppressions)
    .where(
      and(
        eq(suppressions.projectId, projectId),
        equalsAny(
          suppressions.email,
          addresses.map((a) => a.toLowerCase()),
          'text',
        ),
      ),
    );
  return new Set(rows.map((r) => r.email));
}
