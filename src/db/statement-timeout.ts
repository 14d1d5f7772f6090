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

/** What `work` answers; a statement of it cancelled past its bound is thrown as `answer()` says (the caller's words for its bound), any other error as it is. */
export async function answerTimeout<T>(work: () => Promise<T>, answer: () => Error): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!isStatementTimeout(err)) throw err;
    throw answer();
  }
}

/**
 * `work` inside the caller's transaction, its statements cancelled past `ms` each, without losing
 * the transaction when one is: it runs in a savepoint, rolled back when it fails. Answers
 * `timedOut` when PostgreSQL cancelled a statement; any other error is thrown. Afterwards the
 * transaction's statement_timeout is the session's default again (not for a transaction that set
 * its own).
 */
export async function withSavepointTimeout<T>(tx: Db, ms: number, work: () => Promise<T>): Promise<{ value: T } | { timedOut: true }> {
  await tx.execute(sql.raw(`SAVEPOINT bounded; SET LOCAL statement_timeout = ${Math.max(1, Math.floor(ms))}`));
  try {
    const value = await work();
    await tx.execute(sql.raw('RELEASE SAVEPOINT bounded; SET LOCAL statement_timeout TO DEFAULT'));
    return { value };
  } catch (err) {
    // Rolling back to the savepoint also undoes its SET LOCAL.
    await tx.execute(sql.raw('ROLLBACK TO SAVEPOINT bounded; RELEASE SAVEPOINT bounded'));
    if (isStatementTimeout(err)) return { timedOut: true };
    throw err;
  }
}
