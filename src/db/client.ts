import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { pgErrorCode } from './pg-error.ts';

export type Db = NodePgDatabase;

export type Database = {
  pool: pg.Pool;
  /** Drizzle over the pool: for statements that need no transaction. */
  db: Db;
  close: () => Promise<void>;
};

// Return int8 (counts) as numbers: counts here never approach 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));

export function openDatabase(url: string, max = 20, idle: IdleTrim = { idleMs: 30_000, everyMs: 2_000 }): Database {
  // pg-pool's own idle timeout is off: trimIdleClients closes idle clients one at a time instead.
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 0 });
  pool.on('error', () => {}); // an idle client's error is reported on its next use
  const stopTrimming = trimIdleClients(pool, idle);
  return {
    pool,
    db: drizzle(pool),
    close: () => {
      stopTrimming();
      return pool.end();
    },
  };
}

type IdleTrim = { idleMs: number; everyMs: number };

/**
 * Closes connections the pool has not needed for `idleMs`, one every `everyMs`. pg-pool's
 * idleTimeoutMillis closes each client `idleMs` after its release, so the clients a burst released
 * together closed together: 40 PostgreSQL backends exiting at once stalled requests for 50–100 ms
 * on a 2-core machine (bench/README.md § send). "Not needed": the pool had at least one idle client
 * at every check over the last `idleMs`.
 */
function trimIdleClients(pool: pg.Pool, { idleMs, everyMs }: IdleTrim): () => void {
  const idleCounts: number[] = [];
  const window = Math.ceil(idleMs / everyMs);
  let stopped = false;
  let timer: NodeJS.Timeout;
  // Each check is scheduled `everyMs` after the last one ended (its close included), not on a fixed
  // cadence: with setInterval, a check delayed by a busy event loop was followed by the next one on
  // time, and two closes came 31 ms apart.
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(check, everyMs);
    timer.unref();
  };
  const check = () => {
    idleCounts.push(pool.idleCount);
    if (idleCounts.length > window) idleCounts.shift();
    if (idleCounts.length < window || Math.min(...idleCounts) === 0 || pool.waitingCount > 0) return schedule();
    // The newest count is now's, so an idle client is at hand: connect() hands it over at once, and release(true) closes it.
    pool
      .connect()
      .then(
        (client) => client.release(true),
        () => {},
      )
      .finally(schedule);
  };
  schedule();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** A transaction: `tx` is Drizzle bound to the client, `client` is the raw connection (for pg-boss enqueues). */
export type Tx = { tx: Db; client: pg.PoolClient };

/**
 * COMMIT (or a statement committing on its own) was sent but no answer came back (the connection
 * broke): the transaction may or may not have committed, so whoever would run it again
 * (db/write-groups.ts) must not.
 */
export class CommitOutcomeUnknown extends Error {
  constructor(cause: unknown) {
    super('The connection failed before the commit was confirmed: the transaction may have committed', { cause });
  }
}

/** An error PostgreSQL reports (it has a SQLSTATE) means the transaction rolled back; any other leaves the outcome unknown. */
const commitFailure = (err: unknown): unknown => (pgErrorCode(err) ? err : new CommitOutcomeUnknown(err));

/**
 * One statement that commits on its own (no BEGIN, no COMMIT: one round trip), on a connection
 * of its own. It is atomic as a transaction is; when it fails without a SQLSTATE it may have
 * committed (CommitOutcomeUnknown), as when withTransaction's COMMIT does.
 */
export async function inOneStatement<T>(database: Database, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await database.pool.connect();
  try {
    return await fn(client);
  } catch (err) {
    throw commitFailure(err);
  } finally {
    client.release();
  }
}

export async function withTransaction<T>(database: Database, fn: (t: Tx) => Promise<T>): Promise<T> {
  const client = await database.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn({ tx: drizzle(client), client });
    await client.query('COMMIT').catch((err: unknown) => {
      throw commitFailure(err);
    });
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
