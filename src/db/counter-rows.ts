import { type SQL, sql } from 'drizzle-orm';
import { type Database, type Db, withTransaction } from './client.ts';
import { lockKey } from './key-lock.ts';

/**
 * The counters have one row per key and writing backend: `shard` is the writer's pid, so no two
 * live transactions ever write one row and counter writes never wait. Those kept by statement-level
 * triggers (migrations 0018 to 0021, 0031) and the tracked events' day rollup that the event writer
 * keeps (analytics/rollups.ts). Each backend that exits leaves its rows behind, and the pool opens
 * and closes backends as load comes and goes; storage maintenance folds them, hourly, into shard 0.
 */
const COUNTER_TABLES = [
  { table: 'email_counts', key: ['project_id', 'status'] },
  { table: 'workflow_execution_counts', key: ['workflow_id', 'status', 'step_id'] },
  { table: 'workflow_step_counts', key: ['workflow_id', 'step_id', 'status'] },
  { table: 'event_counts', key: ['project_id', 'name'] },
  { table: 'event_day_counts', key: ['project_id', 'name', 'day'] },
  { table: 'event_name_days', key: ['project_id', 'name', 'day'] },
  { table: 'contact_counts', key: ['project_id', 'subscribed'] },
  { table: 'suppression_counts', key: ['project_id', 'reason'] },
] as const;

/**
 * The count a counter table holds for the keys `where` selects (its columns unqualified): the sum
 * of their rows over every shard. A few rows per key, however many rows they count.
 */
export async function sumCounter(db: Db, table: (typeof COUNTER_TABLES)[number]['table'], where: SQL): Promise<number> {
  const { rows } = await db.execute<{ n: string }>(sql`SELECT coalesce(sum(count), 0)::bigint AS n FROM ${sql.identifier(table)} WHERE ${where}`);
  return Number(rows[0].n);
}

/**
 * A project's count in a counter table (`where`), and the part of it that `matching` selects (all
 * of it when undefined): how many rows a filter has, and how far its page walks among the rest.
 */
export async function sumCounterPart(
  db: Db,
  table: (typeof COUNTER_TABLES)[number]['table'],
  where: SQL,
  matching: SQL | undefined,
): Promise<{ all: number; matching: number }> {
  const { rows } = await db.execute<{ all: string; matching: string }>(sql`
    SELECT coalesce(sum(count), 0)::bigint AS all,
           coalesce(sum(count) FILTER (WHERE ${matching ?? sql`true`}), 0)::bigint AS matching
      FROM ${sql.identifier(table)} WHERE ${where}`);
  return { all: Number(rows[0].all), matching: Number(rows[0].matching) };
}

/**
 * About how many rows a page of `limit` walks along an index of all of them to find its matching
 * ones, which spread over the rest as the counters say (all of them when none match).
 */
export const rowsWalkedFor = (limit: number, counted: { all: number; matching: number }): number =>
  Math.min(counted.all, ((limit + 1) * counted.all) / counted.matching);

/**
 * Held by a fold, and by a transaction that deletes counter rows by key rather than adding to them
 * (events/counts.ts forgetPartition): such a delete would miss a shard-0 row that a fold committing
 * meanwhile inserted, and leave it counting events that are gone.
 */
export const holdCounterFolds = (tx: Db): Promise<void> => lockKey(tx, 'counter-rows:fold');

/**
 * Moves the rows of backends no longer running into shard 0, each table in one statement; returns
 * how many rows it folded. A row locked by a live transaction (a pid reused since) is skipped, so
 * this never waits on a writer; the sums are the same before and after.
 */
export async function foldExitedWriters(database: Database): Promise<number> {
  let folded = 0;
  for (const { table, key } of COUNTER_TABLES) {
    const t = sql.identifier(table);
    const k = sql.raw(key.join(', '));
    const matches = sql.raw(key.map((c) => `c.${c} = e.${c}`).join(' AND '));
    const { rows } = await withTransaction(database, async ({ tx }) => {
      await holdCounterFolds(tx);
      return tx.execute<{ n: number }>(sql`
      WITH live AS MATERIALIZED (
        SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL
      ), exited AS MATERIALIZED (
        SELECT ${k}, shard FROM ${t} WHERE shard <> 0 AND shard NOT IN (SELECT pid FROM live) FOR UPDATE SKIP LOCKED
      ), moved AS (
        DELETE FROM ${t} AS c USING exited AS e WHERE ${matches} AND c.shard = e.shard RETURNING ${sql.raw(key.map((c) => `c.${c}`).join(', '))}, c.count
      ), added AS (
        INSERT INTO ${t} AS c (${k}, shard, count)
        SELECT ${k}, 0, sum(count) FROM moved GROUP BY ${k} ORDER BY ${k}
        ON CONFLICT (${k}, shard) DO UPDATE SET count = c.count + excluded.count
      )
      SELECT count(*)::int AS n FROM moved`);
    });
    folded += rows[0].n;
  }
  return folded;
}
