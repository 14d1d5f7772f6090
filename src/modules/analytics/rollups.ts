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
      SELECT e.project_id, e.name, (e.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid() % 16, count(*) FROM ${inserted} AS e WHERE ${CUSTOM_EVENT_TEXT} GROUP BY 1, 2, 3
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
 * A CTE for the statement that deletes contacts (their events go by cascade): their tracked events
 * leave the day counts, in the same statement (`WITH forgotten AS (<this>) DELETE FROM contacts …`).
 * Their first/last-seen rows are deleted by the cascade.
 */
export function forgetContactsEvents(projectId: string, contactIds: SQL): SQL {
  return sql`
    INSERT INTO event_name_days AS d (project_id, name, day, shard, count)
    SELECT ${projectId}, e.name, (e.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid() % 16, -count(*)::int
      FROM events AS e
     WHERE e.project_id = ${projectId} AND e.contact_id = ANY(${contactIds}) AND ${CUSTOM_EVENT}
     GROUP BY 2, 3
    ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = d.count + excluded.count`;
}

/** With every event of a name deleted (events/usage.ts): its rollup rows too. */
export async function forgetEventName(db: Db, projectId: string, name: string): Promise<void> {
  await db.execute(sql`DELETE FROM event_name_days WHERE project_id = ${projectId} AND name = ${name}`);
  await db.execute(sql`DELETE FROM event_name_contacts WHERE project_id = ${projectId} AND name = ${name}`);
}
