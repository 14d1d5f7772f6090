import { and, desc, eq, ilike, sql, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { suppressions } from '../../db/schema/emails.ts';
import { afterCursor, cursorPage } from '../../http/keyset.ts';
import { notFound } from '../../http/errors.ts';
import { containsPattern } from '../../db/like.ts';
import { equalsAny } from '../../db/any.ts';
import { sumCounter } from '../../db/counter-rows.ts';

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
 * Newest first, keyset-paginated on (created_at, email). `total` (first page only) comes from the
 * counters (migration 0031) unless a search narrows the list; a search reads the trigram index on
 * the address (db/search-index.ts).
 */
export async function listSuppressions(ctx: AppContext, projectId: string, q: SuppressionListQuery) {
  const db = ctx.database.db;
  const filters: SQL[] = [eq(suppressions.projectId, projectId)];
  if (q.reason) filters.push(eq(suppressions.reason, q.reason));
  if (q.search) filters.push(ilike(suppressions.email, containsPattern(q.search.trim().toLowerCase())));
  const where = and(...filters)!;
  const page = db
    .select()
    .from(suppressions)
    .where(and(where, afterCursor(q.cursor, suppressions.createdAt, suppressions.email)))
    .orderBy(desc(suppressions.createdAt), desc(suppressions.email))
    .limit(q.limit + 1);
  const count = q.cursor
    ? 0
    : q.search
      ? db
          .select({ n: sql<number>`count(*)::int` })
          .from(suppressions)
          .where(where)
          .then((r) => r[0].n)
      : sumCounter(db, 'suppression_counts', sql`project_id = ${projectId}${q.reason ? sql` AND reason = ${q.reason}` : sql``}`);
  const [rows, total] = await Promise.all([page, count]);
  return { ...cursorPage(rows, q.limit, (r) => [r.createdAt, r.email], toRecord), total };
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
