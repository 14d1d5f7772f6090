import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { SERVICE_EVENT_NAME_TEXT } from '../activity/types.ts';

/**
 * The rollups GET /analytics/top-events reads (db/schema/events.ts: event_name_days,
 * event_name_contacts), kept in step with the events they summarise by the statements that write
 * and delete those events. Only tracked (custom) events are rolled up, the same names as
 * typeCondition('event') in activity/types.ts.
 */

/** A tracked (custom) event name, over an events row aliased `e`. */
const CUSTOM_EVENT_TEXT = `NOT ${SERVICE_EVENT_NAME_TEXT}`;
export const CUSTOM_EVENT = sql.raw(CUSTOM_EVENT_TEXT);

/**
 * Text of the CTEs that add the rows of CTE `inserted` (project_id, contact_id, name, created_at)
 * to the rollups, for a statement `WITH inserted AS (INSERT INTO events … RETURNING …), <this> SELECT …`.
 * As plain text so the events insert can stay one named (prepared) statement.
 */
export function eventRollupCtes(inserted: string): string {
  return `rollup_days AS (
      INSERT INTO event_name_days AS d (project_id, name, day, shard, count)
      SELECT e.project_id, e.name, (e.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid(), count(*) FROM ${inserted} AS e WHERE ${CUSTOM_EVENT_TEXT} GROUP BY 1, 2, 3
      ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = d.count + excluded.count
    ), rollup_contacts AS (
      INSERT INTO event_name_contacts AS c (project_id, name, contact_id, first_at, last_at)
      SELECT e.project_id, e.name, e.contact_id, min(e.created_at), max(e.created_at) FROM ${inserted} AS e
       WHERE e.contact_id IS NOT NULL AND ${CUSTOM_EVENT_TEXT} GROUP BY 1, 2, 3
      ON CONFLICT (project_id, name, contact_id) DO UPDATE SET first_at = least(c.first_at, excluded.first_at), last_at = greatest(c.last_at, excluded.last_at)
       WHERE excluded.first_at < c.first_at OR excluded.last_at > c.last_at
    )`;
}

/**
 * A CTE for a statement that deletes events with `WITH deleted AS (DELETE FROM events AS e … RETURNING
 * e.project_id, e.name, e.created_at), forgotten AS (<this>) …`: the tracked events it deleted leave
 * the day counts, in the same statement. Read from what the DELETE returned, so an event another
 * statement deleted first is subtracted once. A project that is gone has no counts to keep.
 */
export function forgetDeletedEvents(deleted: string): SQL {
  return sql`
    INSERT INTO event_name_days AS d (project_id, name, day, shard, count)
    SELECT e.project_id, e.name, (e.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid(), -count(*)::int
      FROM ${sql.identifier(deleted)} AS e
     WHERE ${CUSTOM_EVENT} AND EXISTS (SELECT 1 FROM projects AS p WHERE p.id = e.project_id)
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = d.count + excluded.count`;
}

/**
 * Once the events of a name are deleted (events/usage.ts), batch by batch: the name's day rows
 * whose shards sum to zero. Run it in a REPEATABLE READ transaction: a row a concurrent track adds
 * to after its snapshot fails it (it runs again) rather than being deleted with the count it gained;
 * a row created after the snapshot is not seen, and stays.
 */
export async function forgetEmptyEventNameDays(db: Db, projectId: string, name: string): Promise<number> {
  const { rowCount } = await db.execute(sql`
    DELETE FROM event_name_days AS d
     WHERE d.project_id = ${projectId} AND d.name = ${name}
       AND d.day IN (SELECT z.day FROM event_name_days AS z WHERE z.project_id = ${projectId} AND z.name = ${name} GROUP BY z.day HAVING sum(z.count) = 0)`);
  return rowCount ?? 0;
}

/**
 * Once the events of a name are deleted: the first/last-seen rows of the next `size` contacts
 * after `after` (by contact id) follow the events left: deleted where the contact has none of the
 * name, moved to the first and last left otherwise (events tracked while the delete ran). Run it in
 * a REPEATABLE READ transaction (as above: a row a concurrent track moved fails the batch, which
 * runs again). Returns how many rows it read and the last contact id.
 */
export async function forgetEventNameContacts(
  db: Db,
  projectId: string,
  name: string,
  after: string | null,
  size: number,
): Promise<{ scanned: number; last: string | null }> {
  const { rows } = await db.execute<{ scanned: number; last: string | null }>(sql`
    WITH batch AS MATERIALIZED (
      SELECT c.contact_id FROM event_name_contacts AS c
       WHERE c.project_id = ${projectId} AND c.name = ${name} AND c.contact_id > ${after ?? ''}
       ORDER BY c.contact_id LIMIT ${size}
    ), seen AS MATERIALIZED (
      SELECT b.contact_id, s.first_at, s.last_at FROM batch AS b
        CROSS JOIN LATERAL (
          SELECT min(e.created_at) AS first_at, max(e.created_at) AS last_at FROM events AS e
           WHERE e.contact_id = b.contact_id AND e.name = ${name} AND e.project_id = ${projectId}) AS s
    ), gone AS (
      DELETE FROM event_name_contacts AS c USING seen AS s
       WHERE c.project_id = ${projectId} AND c.name = ${name} AND c.contact_id = s.contact_id AND s.first_at IS NULL
    ), moved AS (
      UPDATE event_name_contacts AS c SET first_at = s.first_at, last_at = s.last_at FROM seen AS s
       WHERE c.project_id = ${projectId} AND c.name = ${name} AND c.contact_id = s.contact_id AND s.first_at IS NOT NULL
         AND (c.first_at <> s.first_at OR c.last_at <> s.last_at)
    )
    SELECT (SELECT count(*) FROM batch)::int AS scanned, (SELECT max(contact_id) FROM batch) AS last`);
  return rows[0];
}
