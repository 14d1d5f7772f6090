import { type SQL, sql } from 'drizzle-orm';

/**
 * SQL: a job of `queue` whose payload `matches` (a condition over the payload column) will still
 * run — created, waiting to retry, or active for less than `deadAfterSeconds` (an older active job
 * belongs to a worker that died holding it; pg-boss expires it only after the queue's
 * expireInSeconds).
 * The one place outside pg-boss that reads its job table (schema `pgboss`, see boss.ts).
 */
export function liveJobExists(queue: string, matches: (data: SQL) => SQL, deadAfterSeconds: number): SQL {
  return sql`EXISTS (
    SELECT 1 FROM pgboss.job AS j
     WHERE j.name = ${queue}
       AND ${matches(sql`j.data`)}
       AND (j.state IN ('created', 'retry')
            OR (j.state = 'active' AND j.started_on > now() - make_interval(secs => ${deadAfterSeconds}))))`;
}
