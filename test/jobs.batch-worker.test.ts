import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pino from 'pino';
import { z } from 'zod';
import type { AppContext } from '../src/context.ts';
import { type AnyQueueDef, type Jobs, startJobs } from '../src/jobs/boss.ts';
import { createTestDatabase } from './helpers/server.ts';

/**
 * Queues handled batch by batch are polled by Herald's own fetch and completion (jobs/batch-worker.ts)
 * over pg-boss's tables: what pg-boss records of each job must stay what its own worker records.
 */

let url: string;
let pool: pg.Pool;
before(async () => {
  url = await createTestDatabase();
  pool = new pg.Pool({ connectionString: url, max: 2 });
});
after(async () => pool?.end());

const payload = z.object({ k: z.number() });
// The handlers below do not use the context: the queue is not one of Herald's.
const ctx = {} as AppContext;

async function jobsOf(queue: string) {
  const { rows } = await pool.query<{ k: number; state: string; retry_count: number; output: unknown }>(
    `SELECT (data->>'k')::int AS k, state::text, retry_count, output FROM pgboss.job WHERE name = $1 ORDER BY (data->>'k')::int`,
    [queue],
  );
  return rows;
}

async function withQueue(
  def: Omit<AnyQueueDef, 'schema' | 'handler'> & Partial<Pick<AnyQueueDef, 'handler'>>,
  fn: (jobs: Jobs) => Promise<void>,
  { log = pino({ level: 'silent' }), pollingIntervalSeconds = 0.05 }: { log?: pino.Logger; pollingIntervalSeconds?: number } = {},
) {
  const jobs = await startJobs({
    url,
    log,
    runWorkers: true,
    pollingIntervalSeconds,
    queues: [{ schema: payload, handler: async () => {}, ...def }],
  });
  try {
    await fn(jobs);
  } finally {
    await jobs.stop();
  }
}

test('due jobs are handled once each, earliest due first, a batch at a time, and end completed', async () => {
  const batches: number[][] = [];
  const now = Date.now();
  await withQueue(
    {
      name: 'test-batches',
      batchSize: 10,
      workers: 1,
      batchHandler: async (_ctx, items) => {
        batches.push(items.map((i) => (i.data as { k: number }).k).sort((a, b) => a - b));
      },
    },
    async (jobs) => {
      // Job k became due k seconds ago, so job 34 is the earliest; job 99 is due in an hour.
      await jobs.sendMany('test-batches', [
        ...Array.from({ length: 35 }, (_, k) => ({ data: { k }, startAfter: new Date(now - k * 1000) })),
        { data: { k: 99 }, startAfter: new Date(now + 3_600_000) },
      ]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && batches.flat().length < 35; i++) await sleep(50);
      await sleep(200); // a job handled twice would show up here
    },
  );
  assert.deepEqual(
    batches.map((b) => b.length),
    [10, 10, 10, 5],
  );
  assert.deepEqual(batches[0], [25, 26, 27, 28, 29, 30, 31, 32, 33, 34], 'the first batch holds the ten that became due first');
  assert.deepEqual(
    batches.flat().sort((a, b) => a - b),
    Array.from({ length: 35 }, (_, k) => k),
  );
  const rows = await jobsOf('test-batches');
  assert.deepEqual(
    rows.filter((r) => r.k < 35).map((r) => r.state),
    Array.from({ length: 35 }, () => 'completed'),
  );
  assert.equal(rows.find((r) => r.k === 99)?.state, 'created', 'a job not yet due is left waiting');
});

test('with a job weight, a fetch takes jobs, earliest due first, until they hold the batch size, and at least one', async () => {
  const batches: number[][] = [];
  const now = Date.now();
  const weights = [4, 4, 4, 12, 1, 1];
  await withQueue(
    {
      name: 'test-weights',
      batchSize: 10,
      jobWeight: `(data->>'w')::int`,
      workers: 1,
      batchHandler: async (_ctx, items) => {
        batches.push(items.map((i) => (i.data as { k: number }).k).sort((a, b) => a - b));
      },
    },
    async (jobs) => {
      // Job k became due (10 - k) seconds ago: they are taken in the order of k.
      await jobs.sendMany(
        'test-weights',
        weights.map((w, k) => ({ data: { k, w }, startAfter: new Date(now - (10 - k) * 1000) })),
      );
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && batches.flat().length < weights.length; i++) await sleep(50);
      await sleep(200);
    },
  );
  // 4 + 4 (a third 4 would make 12); 4 (12 more would make 16); 12 alone, over the size; 1 + 1.
  assert.deepEqual(batches, [[0, 1], [2], [3], [4, 5]]);
  assert.deepEqual(
    (await jobsOf('test-weights')).map((r) => r.state),
    weights.map(() => 'completed'),
  );
});

test('a job whose payload does not parse fails alone; the jobs fetched with it are handled and complete', async () => {
  const handled: number[] = [];
  await withQueue(
    {
      name: 'test-invalid',
      batchSize: 10,
      retryLimit: 0,
      batchHandler: async (_ctx, items) => {
        handled.push(...items.map((i) => (i.data as { k: number }).k));
      },
    },
    async (jobs) => {
      await jobs.sendMany('test-invalid', [{ data: { k: 1 } }, { data: { k: 'two' } }, { data: { k: 3 } }]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && handled.length < 2; i++) await sleep(50);
      await sleep(200);
    },
  );
  assert.deepEqual(handled.sort(), [1, 3]);
  const { rows } = await pool.query<{ k: unknown; state: string; output: unknown }>(
    `SELECT data->'k' AS k, state::text, output FROM pgboss.job WHERE name = 'test-invalid' ORDER BY data->>'k'`,
  );
  assert.deepEqual(
    rows.map((r) => [r.k, r.state, r.output]),
    [
      [1, 'completed', null],
      [3, 'completed', null],
      ['two', 'failed', { message: 'The payload is not valid' }],
    ],
  );

  // When the rest of the batch then fails, each job keeps its own reason (both wait to be retried).
  await withQueue(
    {
      name: 'test-invalid-throw',
      batchSize: 10,
      retryLimit: 1,
      retryDelaySeconds: 60,
      retryBackoff: false,
      batchHandler: async () => {
        throw new Error('relay down');
      },
    },
    async (jobs) => {
      await jobs.sendMany('test-invalid-throw', [{ data: { k: 1 } }, { data: { k: 'two' } }]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100; i++) {
        const { rows: waiting } = await pool.query(`SELECT 1 FROM pgboss.job WHERE name = 'test-invalid-throw' AND state = 'retry'`);
        if (waiting.length === 2) break;
        await sleep(50);
      }
      await sleep(200);
    },
  );
  const { rows: failed } = await pool.query<{ k: unknown; state: string; output: unknown }>(
    `SELECT data->'k' AS k, state::text, output FROM pgboss.job WHERE name = 'test-invalid-throw' ORDER BY data->>'k'`,
  );
  assert.deepEqual(
    failed.map((r) => [r.k, r.state, r.output]),
    [
      [1, 'retry', { message: 'relay down' }],
      ['two', 'retry', { message: 'The payload is not valid' }],
    ],
  );
});

test('a batch that throws is failed with its message and retried by the queue policy', async () => {
  let attempts = 0;
  await withQueue(
    {
      name: 'test-retries',
      batchSize: 5,
      retryLimit: 1,
      retryDelaySeconds: 1,
      retryBackoff: false,
      batchHandler: async () => {
        attempts++;
        if (attempts === 1) throw new Error('relay unreachable');
      },
    },
    async (jobs) => {
      await jobs.sendMany(
        'test-retries',
        Array.from({ length: 3 }, (_, k) => ({ data: { k } })),
      );
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && attempts < 1; i++) await sleep(50);
      await sleep(100);
      // Failed, and due again a second later (retryDelaySeconds).
      assert.deepEqual(
        (await jobsOf('test-retries')).map((r) => [r.state, r.output]),
        Array.from({ length: 3 }, () => ['retry', { message: 'relay unreachable' }]),
      );
      for (let i = 0; i < 100 && attempts < 2; i++) await sleep(50);
      await sleep(200);
    },
  );
  assert.equal(attempts, 2);
  assert.deepEqual(
    (await jobsOf('test-retries')).map((r) => [r.state, r.retry_count, r.output]),
    Array.from({ length: 3 }, () => ['completed', 1, null]),
  );
});

test('stopping waits for the batch in hand, which completes', async () => {
  let started = false;
  let finished = false;
  await withQueue(
    {
      name: 'test-stop',
      batchSize: 5,
      batchHandler: async () => {
        started = true;
        await sleep(500);
        finished = true;
      },
    },
    async (jobs) => {
      await jobs.sendMany('test-stop', [{ data: { k: 1 } }]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && !started; i++) await sleep(20);
      assert.ok(started);
    },
  );
  assert.ok(finished, 'stop returned only after the handler finished');
  assert.deepEqual(
    (await jobsOf('test-stop')).map((r) => r.state),
    ['completed'],
  );
});

test("a failed job's log line leaves out a database error's message, which can carry a parameter's value", async () => {
  const lines: string[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
  const secret = 'person@example.com';
  const failWithDatabaseError = async () => {
    await pool.query('SELECT $1::int', [secret]); // invalid input syntax for type integer: "person@example.com"
  };
  await withQueue(
    { name: 'test-log-batch', batchSize: 5, retryLimit: 0, batchHandler: failWithDatabaseError },
    async (jobs) => {
      await jobs.sendMany('test-log-batch', [{ data: { k: 1 } }]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && lines.length < 1; i++) await sleep(50);
    },
    { log },
  );
  await withQueue(
    { name: 'test-log-single', retryLimit: 0, handler: failWithDatabaseError },
    async (jobs) => {
      await jobs.sendMany('test-log-single', [{ data: { k: 2 } }]);
      await jobs.startWorkers(ctx);
      for (let i = 0; i < 100 && lines.length < 2; i++) await sleep(50);
    },
    { log, pollingIntervalSeconds: 0.5 }, // pg-boss's own worker polls at most twice a second
  );
  const entries = lines.map((l) => JSON.parse(l) as { msg: string; queue: string; error: { sqlState?: string } });
  assert.deepEqual(
    entries.map((e) => [e.queue, e.error.sqlState, e.msg.replace(/[0-9a-f-]{36}/, '<id>')]),
    [
      ['test-log-batch', '22P02', 'job batch of 1 on test-log-batch failed: database error'],
      ['test-log-single', '22P02', 'job test-log-single <id> failed: database error'],
    ],
  );
  for (const line of lines) assert.ok(!line.includes(secret), `no log line holds the value: ${line}`);
});

test('a fetch that fails waits its error pause, however often the due-queues probe wakes the poller', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
  await withQueue(
    // The weight cannot be read from the job's data: every fetch fails, while the probe (every 50 ms here) keeps finding the job due.
    { name: 'test-fetch-fails', batchSize: 5, jobWeight: `(data->>'k')::int / 0`, batchHandler: async () => {} },
    async (jobs) => {
      await jobs.sendMany('test-fetch-fails', [{ data: { k: 1 } }]);
      await jobs.startWorkers(ctx);
      await sleep(2000);
    },
    { log },
  );
  const failures = lines.filter((l) => l.includes('polling test-fetch-fails failed'));
  assert.equal(failures.length, 1, `${failures.length} failed fetches in 2 s`);
  assert.deepEqual(
    (await jobsOf('test-fetch-fails')).map((r) => r.state),
    ['created'],
  );
});
