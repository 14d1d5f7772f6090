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

export function openDatabase(url: string, max = 20): Database {
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 30_000 });
  pool.on('error', () => {}); // an idle client's error is reported on its next use
  return { pool, db: drizzle(pool), close: () => pool.end() };
}

/** A transaction: `tx` is Drizzle bound to the client, `client` is the raw connection (for pg-boss enqueues). */
export type Tx = { tx: Db; client: pg.PoolClient };

/**
 * COMMIT was sent but no answer came back (the connection broke): the transaction may or may not
 * have committed, so whoever would run it again (db/write-groups.ts) must not.
 */
export class CommitOutcomeUnknown extends Error {
  constructor(cause: unknown) {
    super('The connection failed during COMMIT: the transaction may have committed', { cause });
  }
}

export async function withTransaction<T>(database: Database, fn: (t: Tx) => Promise<T>): Promise<T> {
  const client = await database.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn({ tx: drizzle(client), client });
    await client.query('COMMIT').catch((err: unknown) => {
      // An error PostgreSQL reports (it has a SQLSTATE) means the transaction rolled back.
      throw pgErrorCode(err) ? err : new CommitOutcomeUnknown(err);
    });
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
