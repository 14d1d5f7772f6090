import { DrizzleQueryError, and, asc, eq, inArray, isNull, lt, lte, notInArray, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { workflowExecutions } from '../../db/schema/workflows.ts';
import { pgErrorCode } from '../../db/pg-error.ts';
import { slowProjects } from '../../conditions/slow-projects.ts';
import { WEBHOOK_SLOT_WAIT_MS, advanceBatch } from './engine/advance.ts';
import type { ProjectFilter } from './engine/claim.ts';
import { createWebhookSlots } from './engine/webhook-slots.ts';
import { isActiveExecution } from './engine/index.ts';
import { type WebhookJob, attemptWebhook, webhookJobSize } from './engine/webhook-step.ts';

/**
 * The workflow runner of a worker process: up to RUNNER_LOOPS loops that advance due executions in
 * batches (engine/advance.ts), so one batch's statements overlap another's work in this process.
 * Not a queue job per timer: due executions are found on the `due_at` index, polled by the first
 * loop when idle (one statement asking when the next is due, then a claim if one is): every POLL_MS
 * for WARM_MS after the runner last had work, then every IDLE_POLL_MS or at the next timer's due
 * time, whichever is sooner; and at once while batches come back full. Webhook attempts run beside the loop, a
 * bounded number at a time. A slow lane, one more loop, advances the executions of projects whose
 * CONDITION reads spent a batch's budget lately; it claims nothing while there are none.
 */

export const RUNNER_BATCH_SIZE = 500;
/** How often loop 0 asks whether anything is due while the runner had work lately (WARM_MS). */
const POLL_MS = 50;
/** How long after its last claim the runner keeps polling every POLL_MS. */
const WARM_MS = 10_000;
/**
 * How often loop 0 asks past WARM_MS, unless a timer falls due sooner (it sleeps until that one).
 * Polling every POLL_MS at rest was 20 of an idle worker's 24 statements a second, and about 1.2 %
 * of a core between the process and PostgreSQL.
 */
const IDLE_POLL_MS = 500;
/** Batches advanced at once (each on its own connection; SKIP LOCKED keeps their claims apart). */
const RUNNER_LOOPS = 3;
/** An extra loop with nothing to claim sleeps until loop 0 finds a full batch (or this long). */
const IDLE_HELPER_MS = 60_000;
const MAX_WEBHOOKS_IN_FLIGHT = 100;
/** Projects the slow lane serves at most (each is a parameter of every other claim); past it, the oldest goes back to the loops. */
const MAX_SLOW_CONDITION_PROJECTS = 100;
/** How often the slow lane looks whether a project was sent to it, while none is. */
const SLOW_LANE_IDLE_MS = 1_000;
/**
 * Webhook calls of one project at a time: a receiver that hangs holds each call for up to the
 * 10 s timeout, and one project's such calls used to fill all the slots and stop the runner for
 * every project until one ended.
 */
const MAX_WEBHOOKS_IN_FLIGHT_PER_PROJECT = 25;
/**
 * Characters of webhook requests prepared and not yet sent, in all: a rendered body may be 1 MB,
 * and a batch of 500 such (three loops of them, started at once) would hold 1.5 GB.
 */
const MAX_WEBHOOK_CHARS_IN_FLIGHT = 64 * 1024 * 1024;
const RETRYABLE_SQLSTATES = new Set(['40001', '40P01', '55P03', '57P01', '08006', '08003']);

export type WorkflowRunner = { stop: () => Promise<void>; wake: () => void };

export function startWorkflowRunner(ctx: AppContext, opts: { batchSize?: number; pollMs?: number } = {}): WorkflowRunner {
  const batchSize = opts.batchSize ?? ctx.config.workflowBatchSize ?? RUNNER_BATCH_SIZE;
  const pollMs = opts.pollMs ?? POLL_MS;
  // A batch may take a second pool connection (a cache miss read outside its transaction): a
  // quarter of the pool at most, so small pools keep room for that, the API and delivery.
  const loops = Math.max(1, Math.min(RUNNER_LOOPS, Math.floor(ctx.config.databasePoolSize / 4)));
  let stopped = false;
  const sleepers = new Set<() => void>();
  const inFlight = new Set<Promise<void>>();
  let charsInFlight = 0;
  const webhookSlots = createWebhookSlots({ total: MAX_WEBHOOKS_IN_FLIGHT, perProject: MAX_WEBHOOKS_IN_FLIGHT_PER_PROJECT });

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        sleepers.delete(done);
        resolve();
      }
      sleepers.add(done);
    });
  const wakeAll = () => {
    for (const wake of [...sleepers]) wake();
  };
  // When the runner last claimed an execution (performance.now()): it polls quickly for WARM_MS after.
  let lastWorkAt = -Infinity;
  const warm = () => performance.now() - lastWorkAt < WARM_MS;
  // How long a loop that claimed less than a batch sleeps: `dueInMs` is what its probe found (undefined: it claimed without one).
  const idleSleepMs = (dueInMs: number | null | undefined): number => {
    if (warm() || dueInMs === undefined) return pollMs;
    return dueInMs === null ? IDLE_POLL_MS : Math.min(Math.max(dueInMs, 0), IDLE_POLL_MS);
  };

  const startWebhook = (job: WebhookJob) => {
    const size = webhookJobSize(job);
    charsInFlight += size;
    const p = attemptWebhook(ctx, job)
      .catch((err) => ctx.log.error({ err, executionId: job.executionId }, 'workflow webhook attempt could not be recorded'))
      .finally(() => {
        inFlight.delete(p);
        charsInFlight -= size;
        webhookSlots.give(job.projectId);
        // Its execution is due now (or a promised slot's is): a runner at rest would see it only at its next poll.
        if (!warm()) wakeAll();
      });
    inFlight.add(p);
  };

  // A WEBHOOK step that waits for a slot is due again as soon as one is promised to its project: only
  // while it is still that step, unleased, and due within the wait a batch gave it (not a retry's backoff).
  const dueAgainForFreedSlots = async () => {
    const ready = webhookSlots.readyToRetry();
    if (ready.length === 0) return;
    const now = ctx.clock.now();
    await ctx.database.db.execute(sql`
      UPDATE workflow_executions x SET due_at = ${now.toISOString()}::timestamptz
        FROM unnest(${sql.param(ready.map((w) => w.executionId))}::uuid[], ${sql.param(ready.map((w) => w.stepId))}::uuid[]) AS r(id, step_id)
       WHERE x.id = r.id AND x.current_step_id = r.step_id AND x.status = 'WAITING' AND x.lease_until IS NULL
         AND x.due_at <= ${new Date(now.getTime() + WEBHOOK_SLOT_WAIT_MS).toISOString()}::timestamptz`);
  };

  // Projects whose CONDITION reads spent a batch's budget (engine/steps.ts): for a while the loops
  // leave their executions to a slow lane of their own, so that the batches every other project's
  // executions share do not wait for those reads again and again.
  const slowConditions = slowProjects(MAX_SLOW_CONDITION_PROJECTS);

  // One batch with what a loop shares: freed webhook slots first, the room left, and what the batch found.
  const runBatch = async (opts: {
    fair: boolean;
    projects: ProjectFilter;
    onFullClaim?: () => void;
    probeFirst?: boolean;
  }): Promise<{ claimed: number; dueInMs?: number | null }> => {
    await dueAgainForFreedSlots().catch((err: unknown) =>
      ctx.log.warn({ err }, 'waiting webhook steps could not be made due; they are looked at again within a second'),
    );
    // The loops share the room left; each takes its part of it.
    const webhookRoom = (MAX_WEBHOOK_CHARS_IN_FLIGHT - charsInFlight) / (loops + 1);
    const r = await advanceBatch(ctx, { batchSize, webhookRoom, webhookSlots, ...opts, probeFirst: opts.probeFirst ? { withinMs: IDLE_POLL_MS } : undefined });
    if (r.claimed > 0) lastWorkAt = performance.now();
    for (const job of r.webhooks) startWebhook(job);
    webhookSlots.noteWaiting(r.webhooksWaiting);
    for (const projectId of r.slowConditions) slowConditions.remember(projectId);
    return r;
  };

  // Loop 0 polls; the others run only while batches come back full (loop 0 wakes them), so an idle
  // worker costs one claim per POLL_MS, not one per loop.
  // While batches come back full (a backlog), each project gets its share of a batch (engine/claim.ts).
  let backlog = false;
  const fullClaim = (index: number) => {
    backlog = true;
    if (index === 0) wakeAll();
  };
  const loop = async (index: number) => {
    // Loop 0 found nothing last time: it asks whether anything is due before opening a transaction.
    let idle = false;
    while (!stopped) {
      let claimed = 0;
      let dueInMs: number | null | undefined;
      const projects = { except: slowConditions.list() };
      try {
        ({ claimed, dueInMs } = await runBatch({ fair: backlog, projects, onFullClaim: () => fullClaim(index), probeFirst: idle }));
        idle = index === 0 && claimed === 0;
        backlog = claimed >= batchSize;
      } catch (err) {
        if (stopped) break;
        ctx.log.warn({ err }, 'workflow batch failed; advancing its executions one by one');
        await advanceOneByOne(ctx, batchSize, projects).catch((e) => ctx.log.error({ err: e }, 'workflow advance failed'));
      }
      if (claimed < batchSize && !stopped) await sleep(index === 0 ? idleSleepMs(dueInMs) : IDLE_HELPER_MS);
    }
  };
  // The slow lane: only the remembered projects' executions, each project with its share.
  const slowLane = async () => {
    let idle = false; // as loop 0's: asks whether anything of theirs is due before opening a transaction
    while (!stopped) {
      const slow = slowConditions.list();
      let claimed = 0;
      let dueInMs: number | null | undefined;
      if (slow.length > 0) {
        try {
          ({ claimed, dueInMs } = await runBatch({ fair: slow.length > 1, projects: { only: slow }, probeFirst: idle }));
          idle = claimed === 0;
        } catch (err) {
          if (stopped) break;
          ctx.log.warn({ err }, 'workflow batch of the slow lane failed; advancing its executions one by one');
          await advanceOneByOne(ctx, batchSize, { only: slow }).catch((e) => ctx.log.error({ err: e }, 'workflow advance failed'));
        }
      }
      if (claimed < batchSize && !stopped) await sleep(slow.length > 0 ? idleSleepMs(dueInMs) : SLOW_LANE_IDLE_MS);
    }
  };
  const running = Promise.all([...Array.from({ length: loops }, (_, i) => loop(i)), slowLane()]);

  return {
    wake: wakeAll,
    stop: async () => {
      stopped = true;
      wakeAll();
      await running;
      await Promise.allSettled([...inFlight]);
    },
  };
}

/**
 * After a failed batch: the due executions one per transaction, so one execution whose step keeps
 * failing (a database error) ends FAILED alone instead of blocking every other.
 */
async function advanceOneByOne(ctx: AppContext, limit: number, projects: ProjectFilter): Promise<void> {
  const db = ctx.database.db;
  const due = await db
    .select({ id: workflowExecutions.id })
    .from(workflowExecutions)
    .where(
      and(
        isActiveExecution,
        lte(workflowExecutions.dueAt, ctx.clock.now()),
        or(isNull(workflowExecutions.leaseUntil), lt(workflowExecutions.leaseUntil, sql`now()`)),
        'only' in projects ? inArray(workflowExecutions.projectId, projects.only) : notInArray(workflowExecutions.projectId, projects.except),
      ),
    )
    .orderBy(asc(workflowExecutions.dueAt))
    .limit(limit);
  for (const { id } of due) {
    try {
      const r = await advanceBatch(ctx, { batchSize: 1, ids: [id] });
      for (const job of r.webhooks) await attemptWebhook(ctx, job);
    } catch (err) {
      const code = pgErrorCode(err);
      if (code && RETRYABLE_SQLSTATES.has(code)) continue;
      ctx.log.error({ err, executionId: id }, 'workflow execution failed');
      // The database's own message, not Drizzle's wrapper (which quotes the statement and its parameters).
      const cause = err instanceof DrizzleQueryError && err.cause ? err.cause : err;
      const message = cause instanceof Error ? cause.message : String(cause);
      const now = ctx.clock.now();
      await db
        .update(workflowExecutions)
        .set({ status: 'FAILED', error: `internal error: ${message.slice(0, 500)}`, dueAt: null, completedAt: now, updatedAt: now })
        .where(and(eq(workflowExecutions.id, id), isActiveExecution));
    }
  }
}
