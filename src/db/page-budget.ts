import { type SQL, count, sql } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Database, Db } from './client.ts';
import { hasMoreThan } from './more-than.ts';
import { validationError } from '../http/errors.ts';
import { type HeavyReads, boundedHeavyReadWhen, heavyReadNote } from '../http/heavy-reads.ts';

/**
 * A page of a cursor list carries at most about this many bytes of `data` (a contact's is up to
 * 1 MB, an event's up to 256 KB): past it the page ends early. 100 contacts of 1 MB each had been a 75 MB
 * answer that held the event loop 450 ms and took 332 MB; ten at once, 1.5 GB.
 */
export const PAGE_DATA_BUDGET = 4 * 1024 * 1024;

/**
 * Select-list items for a cursor page query: `data` (or `as`: the row's `column`, only while the
 * page's data before the row is under the budget, so rows past it are not printed) and `in_page`. `bytes` is
 * the row's size of data, cheap to read; `order` is the query's own ORDER BY, so the running sum
 * follows the rows as they are served. The first row is always in the page.
 */
export function dataWithinBudget(column: SQL, bytes: SQL, order: SQL, as = 'data'): SQL {
  const { kept, inPage } = budgetExpressions(column, bytes, order);
  return sql`${kept} AS ${sql.identifier(as)}, ${inPage} AS in_page`;
}

/** dataWithinBudget's two expressions, unnamed, for a query builder's select. */
export function budgetExpressions(column: SQL, bytes: SQL, order: SQL): { kept: SQL; inPage: SQL } {
  // The rows before this one only, so `bytes` is read once per use (a caller without a lateral
  // column pays for each).
  const before = sql`coalesce(sum(${bytes}) OVER (ORDER BY ${order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)`;
  const budget = sql.raw(String(PAGE_DATA_BUDGET));
  return { kept: sql`CASE WHEN ${before} < ${budget} THEN ${column} END`, inPage: sql`${before} < ${budget}` };
}

/** The rows of a page built with dataWithinBudget (`limit + 1` fetched): those served, and whether more follow. */
export function budgetedPage<Row extends { in_page: boolean }>(rows: Row[], limit: number): { items: Row[]; hasMore: boolean } {
  let served = 0;
  while (served < rows.length && served < limit && rows[served].in_page) served++;
  return { items: rows.slice(0, served), hasMore: rows.length > served };
}

/**
 * A page of a page-numbered list (segment members, templates, campaigns) holds at most this many
 * bytes. Such a page cannot end early (the next one starts at a fixed offset), so a page over it
 * is refused: a larger budget than a cursor page's, so that 100 rich templates (160 KB each) pass.
 */
export const NUMBERED_PAGE_BUDGET = 16 * 1024 * 1024;

/**
 * Refuses a page-numbered page over NUMBERED_PAGE_BUDGET, naming the largest `pageSize` whose
 * leading rows fit (at least 1; also `details.pageSize`). `bytes` are the page's rows' sizes, in order.
 */
export function assertPageWithinBudget(bytes: number[], what: string): void {
  const total = bytes.reduce((sum, b) => sum + b, 0);
  if (total <= NUMBERED_PAGE_BUDGET) return;
  let fit = 0;
  for (let sum = 0; fit < bytes.length && sum + bytes[fit] <= NUMBERED_PAGE_BUDGET; fit++) sum += bytes[fit];
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  const pageSize = Math.max(1, fit);
  throw validationError(
    [
      {
        field: 'pageSize',
        code: 'too_big',
        message: `These ${bytes.length} ${what} hold ${mb(total)}, more than the ${mb(NUMBERED_PAGE_BUDGET)} a page carries: ask for pageSize=${pageSize} or less`,
      },
    ],
    { details: { maxBytes: NUMBERED_PAGE_BUDGET, pageSize } },
  );
}

/** A project's templates or campaigns past this many are listed as heavy reads: each page counts them all and walks to its offset. */
export const NUMBERED_LISTED_AT_ONCE = 10_000;

/** How long one statement of a heavy numbered list may run: past it, a 503. */
export const NUMBERED_LIST_STATEMENT_MS = 10_000;

/** The API description's sentence for the templates' and campaigns' lists. */
export const heavyNumberedList = (what: string) =>
  heavyReadNote(`When the project has more than ${NUMBERED_LISTED_AT_ONCE.toLocaleString('en-US')} ${what}`, NUMBERED_LIST_STATEMENT_MS);

/**
 * A page of a page-numbered list of a project's rows in `table` (`project` its project column)
 * that match `where`, in `sort` order: the page's sizes (`bytes`, a text's length read without its
 * TOAST) and the matches' total first, then the rows, only when they fit NUMBERED_PAGE_BUDGET
 * (assertPageWithinBudget names `what`). The total and the offset grow with the project's rows:
 * past NUMBERED_LISTED_AT_ONCE of them (read from at most that many entries of its index) the page
 * is a heavy read (http/heavy-reads.ts). A million templates: a last page 1.5 s, a search 4.3 s.
 */
export async function numberedPage<T extends PgTable>(
  ctx: { database: Database; heavyReads: HeavyReads },
  projectId: string,
  table: T,
  q: { project: PgColumn; where: SQL | undefined; sort: (SQL | PgColumn)[]; bytes: SQL<number>; page: number; pageSize: number; what: string },
): Promise<{ rows: T['$inferSelect'][]; total: number }> {
  const read = (db: Db) => readNumberedPage(db, table, q);
  const many = await hasMoreThan(ctx.database.db, sql`SELECT 1 FROM ${table} WHERE ${q.project} = ${projectId}`, NUMBERED_LISTED_AT_ONCE);
  return boundedHeavyReadWhen(many, ctx, projectId, { ms: NUMBERED_LIST_STATEMENT_MS, what: `Listing this project's ${q.what}` }, read);
}

async function readNumberedPage<T extends PgTable>(
  db: Db,
  table: T,
  q: { where: SQL | undefined; sort: (SQL | PgColumn)[]; bytes: SQL<number>; page: number; pageSize: number; what: string },
): Promise<{ rows: T['$inferSelect'][]; total: number }> {
  const offset = (q.page - 1) * q.pageSize;
  const [sizes, [{ total }]] = await Promise.all([
    db
      .select({ bytes: q.bytes })
      .from(table as PgTable)
      .where(q.where)
      .orderBy(...q.sort)
      .limit(q.pageSize)
      .offset(offset),
    db
      .select({ total: count() })
      .from(table as PgTable)
      .where(q.where),
  ]);
  assertPageWithinBudget(
    sizes.map((r) => r.bytes),
    q.what,
  );
  const rows = await db
    .select()
    .from(table as PgTable)
    .where(q.where)
    .orderBy(...q.sort)
    .limit(q.pageSize)
    .offset(offset);
  return { rows: rows as T['$inferSelect'][], total };
}
