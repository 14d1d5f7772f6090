import { sql } from 'drizzle-orm';
import type { Db } from './client.ts';

/**
 * Takes a transaction-scoped advisory lock named by `key` (e.g. `domains:<projectId>`), held until
 * the transaction ends: a count read under it cannot be passed by a concurrent transaction taking
 * the same key, so caps stop exactly at their limit. Keys are hashed to 64 bits.
 */
export async function lockKey(tx: Db, key: string): Promise<void> {
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`);
}

/** lockKey without waiting: false (and nothing held) when another transaction holds the key. */
export async function tryLockKey(tx: Db, key: string): Promise<boolean> {
  const { rows } = await tx.execute<{ locked: boolean }>(sql`SELECT pg_try_advisory_xact_lock(hashtextextended(${key}, 0)) AS locked`);
  return rows[0].locked;
}
