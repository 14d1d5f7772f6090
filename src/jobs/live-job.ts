import { type SQL, sql } from 'drizzle-orm';

/**
 * SQL: a job of `queue` whose payload field `field` equals `value` will still run — created,
 * waiting to retry, or active for less than `deadAfterSeconds` (an older active job belongs to a
 * worker that died holding it; pg-boss expires it only after the queue's expireInSeconds).
 * The one place outside pg-boss that reads its job table (schema `pgboss`, see boss.ts).
 */
export function liveJobExists(queue: string, field: string, value: SQL, deadAfterSeconds: number): SQL {
  return sql`EXISTS (
    SELECT 1 FROM pgboss.job AS j
     WHERE j.name = ${queue}
       AND j.data->>${field} = ${value}
       AND (j.state IN ('created', 'retry')
            OR (j.state = 'active' AND j.started_on > now() - make_interval(secs => ${deadAfterSeconds}))))`;
}
