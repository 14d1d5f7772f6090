import { type SQL, sql } from 'drizzle-orm';
import type { Db } from './client.ts';

/**
 * Whether the query `rows` (a SELECT without a LIMIT) has more than `n` rows, reading at most
 * n + 1 of them: a bounded look before a read whose cost grows with them.
 */
export async function hasMoreThan(db: Db, rows: SQL, n: number): Promise<boolean> {
  const { rows: counted } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM (${rows} LIMIT ${n + 1}) AS r`);
  return counted[0].n > n;
}
