import assert from 'node:assert/strict';
import pg from 'pg';

/** A connection of its own that runs `lock` in an open transaction and holds what it took until release(). */
export async function holdLock(databaseUrl: string, lock: string, values: unknown[] = []): Promise<{ release: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query(lock, values);
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}

/**
 * `contact_fields` locked: every FILTERED audience statement reads that table first and waits,
 * which holds a campaign's audience read for as long as a test needs; delivery never reads it.
 */
export const lockContactFields = (databaseUrl: string) => holdLock(databaseUrl, 'LOCK TABLE contact_fields IN ACCESS EXCLUSIVE MODE');

/** Resolves with what `answer` resolves to, or with 'still waiting' after `ms` (a request held by a lock). */
export async function within<T>(ms: number, answer: Promise<T>): Promise<T | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>((resolve) => (timer = setTimeout(() => resolve('still waiting'), ms)));
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a statement of this test's database whose text matches `pattern` (ILIKE) is waiting for a lock. */
export async function statementWaitingOnALock(sql: (text: string, values?: unknown[]) => Promise<{ n: number }[]>, pattern: string): Promise<boolean> {
  const [row] = await sql(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query ILIKE $1`,
    [pattern],
  );
  return row.n > 0;
}

/**
 * Waits until `n` statements of this test's database wait for a lock (5 s at most). A failure says
 * what the database's sessions were doing instead, to tell a request that never reached the
 * database from one that waited on something else; `meanwhile` adds what the test saw.
 */
export async function waitingForLocks(sql: (text: string) => Promise<Record<string, unknown>[]>, n: number, meanwhile = () => ''): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const [{ waiting }] = await sql(`SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`);
    if (Number(waiting) >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  const sessions = await sql(
    `SELECT state, wait_event_type, wait_event, left(query, 120) AS query FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY state, query`,
  );
  assert.fail(`${n} statements never waited for the locks; the database's sessions: ${JSON.stringify(sessions)}; ${meanwhile()}`);
}

/**
 * `request` is under way and waits on a lock that `release` lets go: runs `whileHeld`, then lets the
 * lock go and answers what the request answered. When `whileHeld` fails, the lock still goes and the
 * request is waited for (it may hold a slot the next test needs) before the failure is thrown.
 */
export async function answerOnceReleased<T>(release: () => Promise<void>, request: Promise<T>, whileHeld: () => Promise<void>): Promise<T> {
  try {
    await whileHeld();
  } catch (err) {
    await release();
    await request.catch(() => undefined);
    throw err;
  }
  await release();
  return request;
}

/** What `answer` resolves to within `ms`; fails the test with `waited` when it is still waiting then. */
export async function answeredWithin<T>(ms: number, answer: Promise<T>, waited = 'the request waited'): Promise<T> {
  const answered = await within(ms, answer);
  assert.ok(answered !== 'still waiting', waited);
  return answered;
}
