import type pg from 'pg';
import type { TestServer } from './server.ts';
import { waitFor } from './workflows.ts';

/**
 * Runs `request` while another transaction holds what `hold` did in it (a row lock, an uncommitted
 * insert): once the request waits for that transaction, `before` runs in it (a change to commit
 * under the request's feet) and it commits. Returns the request's result.
 */
export async function whileAnotherTransaction<T>(
  server: TestServer,
  steps: { hold: (client: pg.PoolClient) => Promise<unknown>; request: () => Promise<T>; beforeCommit?: (client: pg.PoolClient) => Promise<unknown> },
): Promise<T> {
  const other = await server.ctx.database.pool.connect();
  try {
    await other.query('BEGIN');
    await steps.hold(other);
    // The wait is for this transaction's id: any not-granted lock would also match a background
    // job waiting on something else, and the request might not have reached the lock yet.
    const [{ xid }] = (await other.query<{ xid: string }>(`SELECT pg_current_xact_id()::xid::text AS xid`)).rows;
    const pending = steps.request();
    await waitFor('the request waiting for the other transaction', async () => {
      const [{ n }] = await server.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1`,
        [xid],
      );
      return n > 0;
    });
    await steps.beforeCommit?.(other);
    await other.query('COMMIT');
    return await pending;
  } finally {
    other.release();
  }
}
