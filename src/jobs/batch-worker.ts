import type PgBoss from 'pg-boss';
import { pausable } from './pause.ts';

/**
 * The poller of a queue handled batch by batch (the delivery queue), in place of pg-boss's own
 * worker, with two statements that stay cheap however many jobs wait or have finished:
 *
 * - pg-boss's fetch orders by (priority, created_on), which its fetch index does not hold, so each
 *   fetch sorted every waiting job (10–15 ms a batch with 5,000 waiting). This one takes them in the
 *   index's own order, by `start_after` (when each job became due), and stops at the batch size,
 *   counted in jobs or in the units of work they hold (a delivery job names up to 100 emails).
 * - pg-boss's completion matches ids with `IN (SELECT unnest(…))`, which the planner joined by
 *   rescanning the id list once per active job (25 ms a batch of 100). This one is an index lookup
 *   per id.
 *
 * Everything else stays pg-boss's: the job rows and their states, retries (`fail`), expiry of a
 * batch that never finished, and its maintenance. Only queues of the `standard` policy: the fetch
 * ignores singleton keys.
 */

export type BatchJob = { id: string; data: unknown };

export type BatchWorkerOptions = {
  boss: PgBoss;
  queue: string;
  /** Jobs a fetch takes; with `jobWeight`, units of work. */
  batchSize: number;
  /** SQL over a job's `data`: the units of work it holds (QueueDef.jobWeight). */
  jobWeight?: string;
  /** The pause after a fetch that left nothing waiting, unless `wake` ends it first (jobs/due-queues.ts). */
  pollingIntervalMs: number;
  /**
   * Checks and reads a job's payload (the queue's schema). A job whose payload it refuses fails
   * alone, with "The payload is not valid", and is not handed to `handle`.
   */
  parse: (data: unknown) => { success: true; data: unknown } | { success: false };
  /** Handles the parsed jobs of a fetched batch; a throw fails every one of them (pg-boss retries them by the queue's policy). */
  handle: (jobs: BatchJob[]) => Promise<void>;
  onInvalid: (jobIds: string[]) => void;
  onError: (err: unknown) => void;
};

export type BatchWorker = {
  /** Fetches at once: now if it is waiting, else as soon as the batch in hand is done. */
  wake: () => void;
  /** Whether a fetch or its batch is under way (not waiting between fetches). */
  busy: () => boolean;
  /** Stops fetching and waits for the batch in hand (at most `timeoutMs`). */
  stop: (timeoutMs: number) => Promise<void>;
};

/**
 * Locks up to $2 due jobs, earliest due first, and takes them all, or with a `jobWeight` the
 * first ones that hold at most $2 units together (always the first). Jobs locked and not taken are
 * released with the statement. Each row also says how many jobs were locked: more than were taken,
 * or $2, means more may be waiting.
 */
const fetchSql = (jobWeight = '1') => `
  WITH next AS (
    SELECT id, start_after, (${jobWeight}) AS weight FROM pgboss.job
     WHERE name = $1 AND state < 'active' AND start_after < now()
     ORDER BY start_after
     LIMIT $2
     FOR UPDATE SKIP LOCKED
  ), taken AS (
    SELECT id FROM (
      SELECT id, sum(weight) OVER (ORDER BY start_after, id) AS upto, row_number() OVER (ORDER BY start_after, id) AS n FROM next
    ) AS running
     WHERE upto <= $2 OR n = 1
  )
  UPDATE pgboss.job AS j
     SET state = 'active', started_on = now(),
         retry_count = CASE WHEN j.started_on IS NOT NULL THEN j.retry_count + 1 ELSE j.retry_count END
    FROM taken
   WHERE j.name = $1 AND j.id = taken.id
  RETURNING j.id, j.data, (SELECT count(*) FROM next)::int AS locked`;

const COMPLETE_SQL = `
  UPDATE pgboss.job SET state = 'completed', completed_on = now(), output = NULL
   WHERE name = $1 AND id = ANY($2::uuid[]) AND state = 'active'`;

/** pg-boss fails several jobs with one output (its `fail` takes an id array there too; its types list only one id). */
const failAll = (boss: PgBoss, queue: string, ids: string[], output: { message: string }) =>
  (boss.fail as (name: string, ids: string[], data: object) => Promise<void>).call(boss, queue, ids, output);

const ERROR_PAUSE_MS = 5_000;

export function startBatchWorker(opts: BatchWorkerOptions): BatchWorker {
  const db = opts.boss.getDb();
  const FETCH_SQL = fetchSql(opts.jobWeight);
  let stopping = false;
  const pause = pausable();
  // Woken while a fetch or a batch was under way: fetch again without pausing.
  let woken = false;
  // A wake does not end the pause after a failed fetch: a fetch that keeps failing is not retried,
  // and logged, at every tick of the due-queues probe.
  let pausedAfterError = false;
  let fetching = false;

  const loop = async () => {
    while (!stopping) {
      let more = false;
      let failed = false;
      woken = false;
      fetching = true;
      try {
        const { rows } = (await db.executeSql(FETCH_SQL, [opts.queue, opts.batchSize])) as { rows: (BatchJob & { locked: number })[] };
        const locked = rows[0]?.locked ?? 0;
        more = locked > rows.length || locked === opts.batchSize;
        if (rows.length > 0) await runBatch(rows);
      } catch (err) {
        failed = true;
        opts.onError(err);
      }
      fetching = false;
      if (stopping) break;
      // When more may be waiting, fetch again at once. After an error (the database unreachable,
      // say), wait ERROR_PAUSE_MS whatever wakes come, so an outage is not logged at every one.
      if (failed) {
        pausedAfterError = true;
        await pause.wait(ERROR_PAUSE_MS);
        pausedAfterError = false;
      } else if (!more && !woken) await pause.wait(opts.pollingIntervalMs);
    }
  };

  const runBatch = async (fetched: BatchJob[]) => {
    const jobs: BatchJob[] = [];
    const invalid: string[] = [];
    for (const job of fetched) {
      const parsed = opts.parse(job.data);
      if (parsed.success) jobs.push({ id: job.id, data: parsed.data });
      else invalid.push(job.id);
    }
    if (invalid.length > 0) {
      opts.onInvalid(invalid);
      await failAll(opts.boss, opts.queue, invalid, { message: 'The payload is not valid' });
    }
    if (jobs.length === 0) return;
    const ids = jobs.map((j) => j.id);
    try {
      await opts.handle(jobs);
    } catch (err) {
      await failAll(opts.boss, opts.queue, ids, { message: String((err as Error)?.message ?? err) });
      return;
    }
    await db.executeSql(COMPLETE_SQL, [opts.queue, ids]);
  };

  const running = loop();
  return {
    wake: () => {
      if (pausedAfterError || !pause.end()) woken = true;
    },
    busy: () => fetching,
    stop: async (timeoutMs) => {
      stopping = true;
      pause.end();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
    },
  };
}
