import type PgBoss from 'pg-boss';
import { pausable } from './pause.ts';

/**
 * One statement a tick finds which of a worker process's queues have due jobs, and wakes only
 * their pollers. Each queue's poller used to ask for itself, twice a second, whether it had work:
 * an idle worker sent PostgreSQL 27 statements a second for nothing, and the allocations of those
 * polls grew its young generation at rest (bench/README.md § idle, 24th session).
 *
 * Per queue it reads one entry of pg-boss's index of waiting jobs (`job_i5`: name, start_after,
 * for states below active), the earliest, and compares its time with now, so a backlog costs it
 * nothing more: with 100,000 due jobs waiting, 0.2–0.3 ms. Asking `EXISTS (… start_after < now())`
 * instead let the planner read every due job (a bitmap scan of all 100,000: 54–72 ms a tick).
 */
const DUE_QUEUES_SQL = `
  SELECT q.name FROM unnest($1::text[]) AS q(name)
   CROSS JOIN LATERAL (
     SELECT j.start_after FROM pgboss.job j WHERE j.name = q.name AND j.state < 'active' ORDER BY j.start_after LIMIT 1
   ) AS earliest
   WHERE earliest.start_after < now()`;

/** After a failed probe (the database unreachable, say), longer than a tick: an outage is not logged four times a second. */
const ERROR_PAUSE_MS = 5_000;

export type DueQueuesPoll = { stop: () => Promise<void> };

export function pollDueQueues(opts: {
  boss: PgBoss;
  queues: string[];
  intervalMs: number;
  /** Wakes the pollers of a queue that has due jobs. */
  wake: (queue: string) => void;
  onError: (err: unknown) => void;
}): DueQueuesPoll {
  const db = opts.boss.getDb();
  let stopping = false;
  const pause = pausable();

  const loop = async () => {
    while (!stopping) {
      let failed = false;
      try {
        const { rows } = (await db.executeSql(DUE_QUEUES_SQL, [opts.queues])) as { rows: { name: string }[] };
        if (!stopping) for (const { name } of rows) opts.wake(name);
      } catch (err) {
        failed = true;
        if (!stopping) opts.onError(err);
      }
      if (!stopping) await pause.wait(failed ? ERROR_PAUSE_MS : opts.intervalMs);
    }
  };
  const running = loop();
  return {
    stop: async () => {
      stopping = true;
      pause.end();
      await running;
    },
  };
}
