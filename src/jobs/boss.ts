import PgBoss from 'pg-boss';
import pg from 'pg';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { AppContext } from '../context.ts';
import { loggableError } from '../loggable-error.ts';
import { type BatchWorker, startBatchWorker } from './batch-worker.ts';
import { COMMIT_WAKE_MS, throttledWakes } from './commit-wakes.ts';
import { type DueQueuesPoll, pollDueQueues } from './due-queues.ts';
import { type Listening, listenOn } from '../db/listen.ts';

/** A background queue: its payload schema (checked when a job is picked up), handler and retry policy. */
export type QueueDef<T> = {
  name: string;
  /** Checks a picked-up job's payload (and may normalise it: an older shape of it still queued, say). */
  schema: z.ZodType<T, z.ZodTypeDef, unknown>;
  handler: (ctx: AppContext, data: T, job: { id: string }) => Promise<void>;
  /** Handles a whole fetched batch at once instead (set-based work); a throw fails the batch. */
  batchHandler?: (ctx: AppContext, items: { id: string; data: T }[]) => Promise<void>;
  /** Jobs fetched per poll; each is handled concurrently. With `jobWeight`, units of work instead. */
  batchSize?: number;
  /**
   * SQL over a job's `data` (a batch-handled queue only): how many units of work the job holds. A
   * fetch then takes jobs, earliest due first, until they hold `batchSize` units (at least one job).
   */
  jobWeight?: string;
  /** Concurrent pollers of this queue in one process. */
  workers?: number;
  retryLimit?: number;
  retryDelaySeconds?: number;
  retryBackoff?: boolean;
  expireInSeconds?: number;
  /** Cron expression (UTC) for a recurring job with an empty payload. */
  cron?: string;
  /** pg-boss queue policy; `short` keeps one queued job per singletonKey (debounce). Default `standard`. */
  policy?: 'standard' | 'short' | 'singleton' | 'stately';
};

// Queue definitions differ only in their payload type; the registry holds them side by side.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyQueueDef = QueueDef<any>;

export type EnqueueOptions = {
  /** Enqueue inside this transaction: the job exists only if the transaction commits. */
  client?: pg.PoolClient;
  startAfter?: Date | number;
  singletonKey?: string;
  /** Higher first among the queue's due jobs (default 0); equal ones in the order they were queued. */
  priority?: number;
};

const QUEUE_SETUP_LOCK = 728_145_002;
const STOP_TIMEOUT_MS = 10_000;

/**
 * How often one statement asks which queues have due jobs (jobs/due-queues.ts); a queue's pollers
 * fetch when woken by it. A job waits for a tick at most (`pollingIntervalSeconds` sets it).
 */
const DUE_QUEUES_POLL_SECONDS = 0.25;
/** Each poller's own fetch when nothing woke it: a safety net only, should a wake ever be missed. */
const WORKER_POLL_SECONDS = 30;
/**
 * Jobs committed by a process that runs no pollers of their queue (an API process): its wake
 * notifies this channel, and every worker process wakes a poller of the queue named. Behind
 * PgBouncer in transaction mode LISTEN hears nothing, and the due-queues probe finds the jobs.
 */
const JOBS_DUE_CHANNEL = 'herald_jobs_due';

/** One fetching loop of a queue in this process: Herald's batch poller or pg-boss's worker. */
type Poller = Pick<BatchWorker, 'wake' | 'busy'>;

export type Jobs = {
  /** pg-boss itself, for benchmarks and tests only: modules go through the functions below. */
  boss: PgBoss;
  send: (queue: string, data: object, opts?: EnqueueOptions) => Promise<string | null>;
  /** Many jobs of one queue in one statement (in `opts.client`'s transaction when given). */
  sendMany: (queue: string, jobs: { data: object; startAfter?: Date }[], opts?: { client?: pg.PoolClient }) => Promise<void>;
  /**
   * After this process committed jobs of `queue` that are due now: one of the queue's pollers in
   * this process fetches at once, or right after the batch it has in hand, instead of at the
   * due-queues probe's next tick (a lone send waited up to 250 ms for it). Jobs committed while a
   * batch is under way are fetched together after it. A process that runs no poller of the queue
   * (an API process) notifies the worker processes instead (JOBS_DUE_CHANNEL).
   */
  wake: (queue: string) => void;
  /** Cancels a job that has not finished; a job that already ended is left as it is. */
  cancel: (queue: string, jobId: string) => Promise<void>;
  /** Registers the handlers of every queue (and its cron schedule) in this process. */
  startWorkers: (ctx: AppContext) => Promise<void>;
  stop: () => Promise<void>;
};

export async function startJobs(opts: {
  url: string;
  log: Logger;
  /** Whether this process will run workers (maintenance and cron scheduling go with them). */
  runWorkers: boolean;
  queues: AnyQueueDef[];
  /** How often the queues are asked for due jobs (DUE_QUEUES_POLL_SECONDS by default). */
  pollingIntervalSeconds?: number;
}): Promise<Jobs> {
  const boss = new PgBoss({
    connectionString: opts.url,
    schema: 'pgboss',
    max: 10,
    supervise: opts.runWorkers,
    schedule: opts.runWorkers,
    application_name: 'herald-jobs',
  });
  boss.on('error', (err) => opts.log.error({ err }, 'job queue error'));
  // Creating queues concurrently from several starting processes deadlocks inside pg-boss: serialise it.
  const lock = new pg.Client({ connectionString: opts.url });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [QUEUE_SETUP_LOCK]);
    await boss.start();
    for (const q of opts.queues) {
      await boss.createQueue(q.name, {
        name: q.name,
        retryLimit: q.retryLimit ?? 5,
        retryDelay: q.retryDelaySeconds ?? 5,
        retryBackoff: q.retryBackoff ?? true,
        expireInSeconds: q.expireInSeconds ?? 300,
        policy: q.policy,
      });
    }
  } finally {
    await lock.end().catch(() => {});
  }
  const batchWorkers: BatchWorker[] = [];
  // Each queue's pollers in this process (filled by startWorkers).
  const pollers = new Map<string, Poller[]>();
  let dueQueues: DueQueuesPoll | null = null;
  let dueNotices: Listening | null = null;
  const db = boss.getDb();
  // A queue with pollers here wakes one of them; otherwise (an API process) the worker processes
  // are told, each of which wakes one of its own (throttled there too).
  const commitWakes = throttledWakes(COMMIT_WAKE_MS, (queue) => {
    const of = pollers.get(queue);
    if (of) (of.find((p) => p.busy()) ?? of[0]).wake();
    else
      void db
        .executeSql('SELECT pg_notify($1, $2)', [JOBS_DUE_CHANNEL, queue])
        .catch((err: unknown) => opts.log.warn({ error: loggableError(err), queue }, 'telling the workers of new jobs failed'));
  });
  return {
    boss,
    send: (queue, data, o = {}) =>
      boss.send(queue, data, {
        db: o.client ? { executeSql: (text, values) => o.client!.query(text, values) } : undefined,
        startAfter: o.startAfter instanceof Date ? o.startAfter : undefined,
        singletonKey: o.singletonKey,
        // pg-boss refuses the key present but undefined.
        ...(o.priority === undefined ? {} : { priority: o.priority }),
      }),
    sendMany: async (queue, jobs, o = {}) => {
      if (jobs.length === 0) return;
      await boss.insert(
        jobs.map((j) => ({ name: queue, data: j.data, startAfter: j.startAfter })),
        o.client ? { db: { executeSql: (text, values) => o.client!.query(text, values) } } : {},
      );
    },
    wake: (queue) => commitWakes.wake(queue),
    cancel: async (queue, jobId) => {
      await boss.cancel(queue, jobId);
    },
    startWorkers: async (ctx) => {
      const addPoller = (queue: string, poller: Poller) => pollers.set(queue, [...(pollers.get(queue) ?? []), poller]);
      for (const q of opts.queues) {
        const batchSize = q.batchSize ?? 1;
        for (let i = 0; i < (q.workers ?? 1); i++) {
          if (q.batchHandler) {
            // Herald's batch poller fetches without pg-boss's singleton rules (jobs/batch-worker.ts).
            if (q.policy && q.policy !== 'standard') throw new Error(`queue ${q.name}: a batch handler needs the standard policy`);
            const batchHandler = q.batchHandler;
            const worker = startBatchWorker({
              boss,
              queue: q.name,
              batchSize,
              jobWeight: q.jobWeight,
              pollingIntervalMs: WORKER_POLL_SECONDS * 1000,
              // A job whose payload does not parse fails alone: it must not hold back the jobs fetched with it.
              parse: (data) => q.schema.safeParse(data),
              onInvalid: (jobIds) => opts.log.error({ queue: q.name, jobIds }, `${jobIds.length} job(s) on ${q.name} failed: the payload is not valid`),
              handle: async (jobs) => {
                try {
                  await batchHandler(ctx, jobs);
                } catch (err) {
                  // The line's text takes loggableError's message: a database error's own message can carry a parameter's value.
                  const error = loggableError(err);
                  opts.log.error({ error, queue: q.name, jobs: jobs.length }, `job batch of ${jobs.length} on ${q.name} failed: ${String(error.message)}`);
                  throw err;
                }
              },
              onError: (err) => opts.log.error({ error: loggableError(err), queue: q.name }, `polling ${q.name} failed`),
            });
            batchWorkers.push(worker);
            addPoller(q.name, worker);
            continue;
          }
          const workerId: string = await boss.work(q.name, { batchSize, pollingIntervalSeconds: WORKER_POLL_SECONDS }, async (jobs) => {
            // Each job succeeds or fails on its own; pg-boss completes the rest of the batch.
            const results = await Promise.allSettled(jobs.map(async (job) => q.handler(ctx, q.schema.parse(job.data), { id: job.id })));
            for (const [j, r] of results.entries()) {
              if (r.status === 'fulfilled') continue;
              const error = loggableError(r.reason);
              opts.log.error({ error, queue: q.name, jobId: jobs[j].id }, `job ${q.name} ${jobs[j].id} failed: ${String(error.message)}`);
              await boss.fail(q.name, jobs[j].id, { message: String((r.reason as Error)?.message ?? r.reason) });
            }
            // pg-boss waits a polling interval between fetches; a full batch means more work is waiting.
            if (jobs.length === batchSize) boss.notifyWorker(workerId);
          });
          // pg-boss does not say whether its worker is fetching: notified, it fetches now or after its batch.
          addPoller(q.name, { wake: () => boss.notifyWorker(workerId), busy: () => false });
        }
        if (q.cron) await boss.schedule(q.name, q.cron, {}, { tz: 'UTC' });
      }
      dueQueues = pollDueQueues({
        boss,
        queues: [...pollers.keys()],
        intervalMs: (opts.pollingIntervalSeconds ?? DUE_QUEUES_POLL_SECONDS) * 1000,
        wake: (queue) => {
          for (const poller of pollers.get(queue) ?? []) poller.wake();
        },
        onError: (err) => opts.log.error({ error: loggableError(err) }, 'polling the queues for due jobs failed'),
      });
      dueNotices = await listenOn({
        url: opts.url,
        channel: JOBS_DUE_CHANNEL,
        applicationName: 'herald-jobs-due',
        log: opts.log,
        onPayload: (queue) => {
          if (pollers.has(queue)) commitWakes.wake(queue);
        },
      });
    },
    stop: async () => {
      commitWakes.stop();
      await dueNotices?.close();
      await dueQueues?.stop();
      await Promise.all(batchWorkers.map((w) => w.stop(STOP_TIMEOUT_MS)));
      await boss.stop({ graceful: true, timeout: STOP_TIMEOUT_MS, wait: true });
    },
  };
}
