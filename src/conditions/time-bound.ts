import type { AppContext } from '../context.ts';
import type { Database, Db } from '../db/client.ts';
import { asHeavyRead } from '../http/heavy-reads.ts';
import { answerTimeout, setStatementTimeout, withStatementTimeout } from '../db/statement-timeout.ts';
import { conditionError } from './errors.ts';

/**
 * How long PostgreSQL may spend on one statement over a condition when a request waits for it (a
 * count, a page of members, a campaign's audience). Conditions are bounded in size, but not every
 * cost is: 50 date filters on a data field cost about 10 µs each per contact (10,000 contacts:
 * 2.4–3.1 s, and ten times that with ten times the contacts).
 */
export const CONDITION_STATEMENT_MS = 10_000;

/**
 * How long PostgreSQL may spend on one statement over one contact's condition (a workflow
 * CONDITION step, a contact's tracked segments re-evaluated), which usually takes a millisecond:
 * those run in workers shared by every project, where a tree that reads a lot for one contact (500
 * filters counting up to a million events each of a contact that has them) held everyone's work.
 */
export const CONTACT_CONDITION_STATEMENT_MS = 2_000;

/** `work` with its statements over a condition bounded in time: past it, a 400 on `path`. */
export async function timedCondition<T>(work: () => Promise<T>, path = 'condition'): Promise<T> {
  return answerTimeout(work, () =>
    conditionError(`Evaluating the condition over this project's contacts took longer than ${CONDITION_STATEMENT_MS / 1000} s: use fewer or simpler filters`, {
      path,
    }),
  );
}

/**
 * How long a statement beside a condition's read in the same transaction may take: waiting for a
 * row lock, or writing what the read found. Those are bounded in size, so only a lock or a busy
 * database makes them slow; under CONDITION_STATEMENT_MS such a wait was answered as a costly
 * condition (400 "use fewer or simpler filters") for a one-filter segment.
 */
export const BESIDE_CONDITION_STATEMENT_MS = 30_000;

/** Bounds the caller's transaction's statements as BESIDE_CONDITION_STATEMENT_MS says, until a conditionRead. */
export const boundStatementsBesideCondition = (tx: Db): Promise<void> => setStatementTimeout(tx, BESIDE_CONDITION_STATEMENT_MS);

/**
 * `read` (statements over a condition) in the caller's transaction under CONDITION_STATEMENT_MS,
 * a 400 on `path` past it; the statements after it are bounded as BESIDE_CONDITION_STATEMENT_MS
 * says. A statement timeout the caller sees from any other statement is a lock or a busy database.
 */
export async function conditionRead<T>(tx: Db, read: () => Promise<T>, path = 'condition'): Promise<T> {
  await boundConditionStatements(tx);
  const value = await timedCondition(read, path);
  await boundStatementsBesideCondition(tx);
  return value;
}

/** `work` in a transaction of its own, its statements bounded as timedCondition says. */
export const withConditionTimeout = <T>(database: Database, work: (db: Db) => Promise<T>, path = 'condition'): Promise<T> =>
  timedCondition(() => withStatementTimeout(database, CONDITION_STATEMENT_MS, work), path);

/** Bounds the rest of the caller's transaction's statements as timedCondition says (wrap the transaction in timedCondition). */
export const boundConditionStatements = (tx: Db): Promise<void> => setStatementTimeout(tx, CONDITION_STATEMENT_MS);

/**
 * withConditionTimeout for a request that waits for the read: also in one of the project's
 * heavy-read slots (http/heavy-reads.ts), a 429 at once when they are taken. The worker's reads
 * take no slot.
 */
export const requestConditionRead = <T>(
  ctx: Pick<AppContext, 'database' | 'heavyReads'>,
  projectId: string,
  work: (db: Db) => Promise<T>,
  path = 'condition',
): Promise<T> => asHeavyRead(ctx.heavyReads, projectId, () => withConditionTimeout(ctx.database, work, path));
