import PgBoss from 'pg-boss';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { AppContext } from '../context.ts';

/** A background queue: its payload schema (checked when a job is picked up), handler and retry policy. */
export type QueueDef<T> = {
  name: string;
  schema: z.ZodType<T>;
  handler: (ctx: AppContext, data: T, job: { id: string }) => Promise<void>;
  /** Jobs fetched per poll; each is handled concurrently. */
  batchSize?: number;
  retryLimit?: number;
  retryDelaySeconds?: number;
  retryBackoff?: boolean;
  expireInSeconds?: number;
  /** Cron expression (UTC) for a recurring job with an empty payload. */
  cron?: string;
};

// Queue definitions differ only in their payload type; the registry holds them side by side.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyQueueDef = QueueDef<any>;

export type EnqueueOptions = {
  /** Enqueue inside this transaction: the job exists only if the transaction commits. */
  client?: pg.PoolClient;
  startAfter?: Date | number;
  singletonKey?: string;
};

export type Jobs = {
  boss: PgBoss;
  send: (queue: string, data: object, opts?: EnqueueOptions) => Promise<string | null>;
  stop: () => Promise<void>;
};

export async function startJobs(opts: {
  url: string;
  log: Logger;
  runWorkers: boolean;
  queues: AnyQueueDef[];
  ctx: () => AppContext;
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
  await boss.start();
  for (const q of opts.queues) {
    await boss.createQueue(q.name, {
      name: q.name,
      retryLimit: q.retryLimit ?? 5,
      retryDelay: q.retryDelaySeconds ?? 5,
      retryBackoff: q.retryBackoff ?? true,
      expireInSeconds: q.expireInSeconds ?? 300,
    });
  }
  if (opts.runWorkers) {
    for (const q of opts.queues) {
      await boss.work(
        q.name,
        { batchSize: q.batchSize ?? 1, pollingIntervalSeconds: opts.pollingIntervalSeconds ?? 0.5 },
        async (jobs) => {
          const ctx = opts.ctx();
          await Promise.all(
            jobs.map(async (job) => {
              const data = q.schema.parse(job.data);
              await q.handler(ctx, data, { id: job.id });
            }),
          );
        },
      );
      if (q.cron) await boss.schedule(q.name, q.cron, {}, { tz: 'UTC' });
    }
  }
  return {
    boss,
    send: (queue, data, o = {}) =>
      boss.send(queue, data, {
        db: o.client ? { executeSql: (text, values) => o.client!.query(text, values) } : undefined,
        startAfter: o.startAfter instanceof Date ? o.startAfter : undefined,
        singletonKey: o.singletonKey,
      }),
    stop: () => boss.stop({ graceful: true, timeout: 10_000, wait: true }),
  };
}
