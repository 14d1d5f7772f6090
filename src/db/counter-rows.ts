import { sql } from 'drizzle-orm';
import type { Db } from './client.ts';

/**
 * The counters that statement-level triggers keep (migrations 0018, 0019) have one row per key and
 * writing backend: `shard` is the writer's pid, so no two live transactions ever write one row and
 * counter writes never wait. Each backend that exits leaves its rows behind, and the pool opens and
 * closes backends as load comes and goes; storage maintenance folds them, hourly, into shard 0.
 */
const COUNTER_TABLES = [
  { table: 'email_counts', key: ['project_id', 'status'] },
  { table: 'workflow_execution_counts', key: ['workflow_id', 'status', 'step_id'] },
  { table: 'workflow_step_counts', key: ['workflow_id', 'step_id', 'status'] },
];

/**
 * Moves the rows of backends no longer running into shard 0, each table in one statement; returns
 * how many rows it folded. A row locked by a live transaction (a pid reused since) is skipped, so
 * this never waits on a writer; the sums are the same before and after.
 */
export async function foldExitedWriters(db: Db): Promise<number> {
  let folded = 0;
  for (const { table, key } of COUNTER_TABLES) {
    const t = sql.identifier(table);
    const k = sql.raw(key.join(', '));
    const matches = sql.raw(key.map((c) => `c.${c} = e.${c}`).join(' AND '));
    const { rows } = await db.execute<{ n: number }>(sql`
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
    folded += rows[0].n;
  }
  return folded;
}
