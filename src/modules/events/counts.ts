import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';

/**
 * The exact number of a project's events, from the per-(project, name) counters in event_counts
 * (db/schema/events.ts): a few rows per name however many events there are. Triggers on `events`
 * (migration 0009) keep the counters in the statement that inserts, deletes or updates events;
 * the one change they cannot see, dropping a partition, goes through forgetPartition.
 */

/** Every event of the project, or those with one name. */
export async function countEvents(db: Db, projectId: string, name?: string): Promise<number> {
  const { rows } = await db.execute<{ n: string }>(sql`
    SELECT coalesce(sum(count), 0)::bigint AS n FROM event_counts
     WHERE project_id = ${projectId}${name === undefined ? sql`` : sql` AND name = ${name}`}`);
  return Number(rows[0].n);
}

/**
 * Before a partition is dropped (no trigger fires for DROP TABLE): its rows leave the counters, in
 * the dropping transaction. The partition is locked against writes first, so that no event arrives
 * in it or leaves it between the count and the drop; reads go on.
 */
export async function forgetPartition(tx: Db, partition: string): Promise<void> {
  await tx.execute(sql`LOCK TABLE ${sql.identifier(partition)} IN SHARE MODE`);
  await tx.execute(sql`
    INSERT INTO event_counts AS c (project_id, name, shard, count)
    SELECT r.project_id, r.name, pg_backend_pid() % 16, -count(*) FROM ${sql.identifier(partition)} AS r
     GROUP BY r.project_id, r.name ORDER BY r.project_id, r.name
    ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count`);
}
