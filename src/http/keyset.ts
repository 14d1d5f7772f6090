import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { badRequest } from './errors.ts';

/**
 * Cursor lists ordered newest first on (a timestamp, a unique tie-breaker): the condition for the
 * rows after a cursor, and the page built from `limit + 1` fetched rows.
 */
export function afterCursor(cursor: string | undefined, time: AnyPgColumn, key: AnyPgColumn, validKey: (k: string) => boolean = () => true): SQL | undefined {
  if (!cursor) return undefined;
  const c = decodeCursor(cursor);
  const at = new Date(String(c.sortValue));
  if (Number.isNaN(at.getTime()) || !validKey(c.id)) throw badRequest('Invalid cursor', { cursor });
  // A row comparison, which the (…, time, key) index starts its scan at. The same condition
  // written as `time < at OR (time = at AND key < id)` was a filter: every page walked the list
  // from its newest row, 365–406 ms for a page 900,000 emails deep (docs/decisions.md § Hardening).
  return sql`(${time}, ${key}) < (${at.toISOString()}::timestamptz, ${c.id})`;
}

export function cursorPage<Row, Item>(
  rows: Row[],
  limit: number,
  position: (row: Row) => [Date, string],
  toItem: (row: Row) => Item,
): { data: Item[]; cursor: string | undefined; hasMore: boolean } {
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const cursor = hasMore && last ? encodeCursor(position(last)[0].toISOString(), position(last)[1]) : undefined;
  return { data: page.map(toItem), cursor, hasMore };
}

/**
 * The total of a filtered list's first page from its `limit + 1` fetched rows when they are all
 * the matches (fewer than a page and one); else `count()`, a second walk of what the page read
 * (a search for one address skips it).
 */
export const firstPageTotal = async (fetched: number, limit: number, count: () => Promise<number>): Promise<number> => (fetched <= limit ? fetched : count());
