import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { holdCounterFolds } from '../../db/counter-rows.ts';
import { utcDate } from './range.ts';

/**
 * The exact number of a project's events, from the per-(project, name) counters in event_counts
 * (db/schema/events.ts): a few rows per name however many events there are. Triggers on `events`
 * (migration 0009) keep the counters in the statement that inserts, deletes or updates events;
 * the one change they cannot see, dropping a partition, goes through forgetPartition.
 */

/** Every event of the project, or those with one name. */
export const countEvents = (db: Db, projectId: string, name?: string): Promise<number> =>
  countEventsNamed(db, projectId, name === undefined ? undefined : sql`e.name = ${name}`);

/** The project's events whose name meets `names`, a condition on the counters' row aliased `e` (activity/types.ts typeCondition). */
export async function countEventsNamed(db: Db, projectId: string, names: SQL | undefined): Promise<number> {
  const { rows } = await db.execute<{ n: string }>(sql`
    SELECT coalesce(sum(e.count), 0)::bigint AS n FROM event_counts AS e
     WHERE e.project_id = ${projectId}${names === undefined ? sql`` : sql` AND ${names}`}`);
  return Number(rows[0].n);
}

/**
 * Before a partition is dropped (no trigger fires for DROP TABLE): its rows leave the counters, in
 * the dropping transaction. The partition is locked against writes first, so that no event arrives
 * in it or leaves it between the count and the drop; reads go on. Its month's day counts are
 * deleted: every event of those days is in it.
 */
export async function forgetPartition(tx: Db, partition: { name: string; start: Date; end: Date }): Promise<void> {
  const table = sql.identifier(partition.name);
  await tx.execute(sql`LOCK TABLE ${table} IN SHARE MODE`);
  await holdCounterFolds(tx);
  await tx.execute(sql`
    INSERT INTO event_counts AS c (project_id, name, shard, count)
    SELECT r.project_id, r.name, pg_backend_pid(), -count(*) FROM ${table} AS r
     GROUP BY r.project_id, r.name ORDER BY r.project_id, r.name
    ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count`);
  await tx.execute(sql`
    DELETE FROM event_day_counts WHERE day >= ${utcDate(partition.start)}::date AND day < ${utcDate(partition.end)}::date`);
}
