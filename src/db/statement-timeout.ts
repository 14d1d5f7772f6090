import { sql } from 'drizzle-orm';
import { type Database, type Db, withTransaction } from './client.ts';
import { pgErrorCode } from './pg-error.ts';

/** Makes PostgreSQL cancel each further statement of the caller's transaction that runs longer than `ms` (SQLSTATE 57014). */
export async function setStatementTimeout(tx: Db, ms: number): Promise<void> {
  await tx.execute(sql.raw(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(ms))}`));
}

/** Runs `work` in a transaction of its own whose statements PostgreSQL cancels past `ms` each. */
export async function withStatementTimeout<T>(database: Database, ms: number, work: (db: Db) => Promise<T>): Promise<T> {
  return withTransaction(database, async ({ tx }) => {
    await setStatementTimeout(tx, ms);
    return work(tx);
  });
}

/** A statement PostgreSQL cancelled (statement_timeout, or a cancel request). */
export const isStatementTimeout = (err: unknown): boolean => pgErrorCode(err) === '57014';
