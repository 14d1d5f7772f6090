import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { firstPageTotal } from '../../http/keyset.ts';
import { badRequest } from '../../http/errors.ts';
import { isStorableText } from '../../db/storable-text.ts';
import { CONTACT_ID, type ContactRecord, type ListContactsQuery } from './schemas.ts';
import { type ContactRow, contactColumns, isoUs, toContactRecord } from './sql.ts';
import { containsPattern } from '../../db/like.ts';
import { budgetedPage, dataWithinBudget } from '../../db/page-budget.ts';
import { sumCounter } from '../../db/counter-rows.ts';

export type ContactList = { data: ContactRecord[]; cursor?: string; hasMore: boolean; total: number };

const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The position after which the next page starts, checked against the sort it must belong to. */
function cursorPosition(cursor: string, sort: ListContactsQuery['sort']): { value: string; id: string } {
  const { sortValue, id } = decodeCursor(cursor);
  const valid =
    typeof sortValue === 'string' &&
    isStorableText(sortValue) &&
    CONTACT_ID.test(id) &&
    (sort === 'email' ? sortValue.length <= 254 : CURSOR_TIME.test(sortValue) && !Number.isNaN(Date.parse(sortValue)));
  if (!valid) throw badRequest('Invalid cursor', { cursor });
  return { value: sortValue, id };
}

/**
 * The project's contacts, or those of one subscription, from the counters in contact_counts
 * (db/schema/contacts.ts), which triggers on `contacts` keep in the statements that write contacts
 * (migration 0021).
 */
const countContacts = (db: Db, projectId: string, subscribed: boolean | undefined): Promise<number> =>
  sumCounter(db, 'contact_counts', sql`project_id = ${projectId}${subscribed === undefined ? sql`` : sql` AND subscribed = ${subscribed}`}`);

/** A search's matches, counted. */
const countMatches = async (db: Db, where: SQL): Promise<number> =>
  Number((await db.execute<{ n: string }>(sql`SELECT count(*) AS n FROM contacts AS c WHERE ${where}`)).rows[0].n);

/**
 * Keyset pagination in SQL: `(created_at, id)` on the matching index, or `email` alone on the
 * unique `(project_id, email)` index (emails are unique per project, so they are a total order).
 * Rows inserted during a walk never shift the pages already served. `total` only on the first page.
 * A page ends early, with `hasMore`, once it holds PAGE_DATA_BUDGET bytes of data (db/page-budget.ts).
 */
export async function listContacts(db: Db, projectId: string, q: ListContactsQuery): Promise<ContactList> {
  const filters: SQL[] = [sql`c.project_id = ${projectId}`];
  if (q.subscribed !== undefined) filters.push(sql`c.subscribed = ${q.subscribed}`);
  // lower(email): the expression of the trigram index (db/search-index.ts), which segment conditions on the email use too.
  if (q.search) filters.push(sql`lower(c.email) LIKE ${containsPattern(q.search.trim().toLowerCase())}`);
  const where = sql.join(filters, sql` AND `);

  const after = q.cursor ? cursorPosition(q.cursor, q.sort) : null;
  const op = sql.raw(q.dir === 'asc' ? '>' : '<');
  const dir = sql.raw(q.dir === 'asc' ? 'ASC' : 'DESC');
  const keyset =
    q.sort === 'email'
      ? { after: after && sql` AND c.email ${op} ${after.value}`, order: sql`c.email ${dir}`, value: sql`c.email` }
      : {
          after: after && sql` AND (c.created_at, c.id) ${op} (${after.value}::timestamptz, ${after.id})`,
          order: sql`c.created_at ${dir}, c.id ${dir}`,
          value: isoUs('c.created_at'),
        };

  // The size of each contact's data comes from data_bytes (computed for rows older than it), so a
  // page of large data ends at the budget without printing the rest.
  const page = db.execute<ContactRow & { sort_value: string; in_page: boolean }>(sql`
    SELECT ${contactColumns('c', dataWithinBudget(sql`c.data`, sql`s.bytes`, keyset.order))}, ${keyset.value} AS sort_value
      FROM contacts AS c CROSS JOIN LATERAL (SELECT coalesce(c.data_bytes, octet_length(c.data::text)) AS bytes OFFSET 0) AS s
     WHERE ${where}${keyset.after ?? sql``}
     ORDER BY ${keyset.order}
     LIMIT ${q.limit + 1}`);
  const counting = after || q.search ? undefined : countContacts(db, projectId, q.subscribed);
  const [{ rows }, counted] = await Promise.all([page, counting]);
  const total = counted ?? (after ? 0 : await firstPageTotal(rows.length, q.limit, () => countMatches(db, where)));

  const { items, hasMore } = budgetedPage(rows, q.limit);
  const last = items[items.length - 1];
  const list: ContactList = { data: items.map(toContactRecord), hasMore, total };
  if (hasMore) list.cursor = encodeCursor(last.sort_value, last.id);
  return list;
}
