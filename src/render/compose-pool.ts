import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { FieldError } from '../http/errors.ts';
import type { ComposedHtml, ComposedSource, ComposeHtmlInput, ComposeMessageInput, ComposePartsInput } from './compose-html.ts';
import { RENDER_LIMITS, RenderLimitError } from './limits.ts';
import { TemplateRenderError, TemplateSyntaxError } from './engine.ts';
import { shrinkHeapAfterWork } from '../memory-reducer.ts';
import { IDLE_THREAD_MS, THREAD_YOUNG_GENERATION_MB, idleTimer } from './idle-timer.ts';
import { LruCache } from './lru.ts';

/** What a thread does: compose a message, or syntax-check template sources (answered with their field errors). */
export type ThreadInput = ComposeHtmlInput | { check: Record<string, string> };
type ThreadResult = ComposedHtml | ComposedSource | FieldError[];
/**
 * `tenant`: whose work it is (a project; '' for none). `giveUpAfterMs`: see ComposePool.compose.
 * `queuedAt`: performance.now() when it was asked for.
 */
type Job = {
  input: ThreadInput;
  ahead: boolean;
  tenant: string;
  giveUpAfterMs: number | null;
  queuedAt: number;
  resolve: (r: ThreadResult) => void;
  reject: (e: Error) => void;
};
/** `ms`: how long the thread worked on it; `recalled`: the thread did not start it (see Slot.recall). */
type Reply = { id: number; started?: true; recalled?: true; ms?: number; result?: ThreadResult; error?: { name: string; message: string; field?: string } };
/** `weight`: its share of a thread's PIPELINE; `recalled`: posted behind a slow job and recalled, its answer not yet back. */
type Sent = Job & { id: number; weight: number; recalled?: true };
/**
 * A thread and the jobs posted to it, in the order it runs them; `running` has its clock started.
 * `slow`: the running job has passed SLOW_COMPOSE_MS, so nothing more is posted behind it.
 * `recall`: shared with the thread, which skips (answering `recalled`) any job whose id is below it.
 */
type Slot = {
  worker: Worker | null;
  jobs: Sent[];
  running: { id: number; timer: NodeJS.Timeout } | null;
  slow: boolean;
  recall: BigInt64Array;
  /** Recalled jobs whose answer came back, held until all have (they go back to their queues together, in order). */
  returned: Sent[];
  idle: ReturnType<typeof idleTimer>;
};

/**
 * Jobs posted to a thread ahead of the one it runs: the thread starts the next as soon as it has
 * answered one, instead of waiting for a busy event loop to read the answer and post again.
 */
const PIPELINE = 8;

/**
 * A message with attachments is posted only to an idle thread, and nothing behind it: a thread
 * holds at most one large input. So is a message of a slow tenant (see ComposePool.costOf): nothing
 * waits behind it on a thread.
 */
const attachmentsOf = (input: ThreadInput) => ('check' in input ? [] : (input.message?.attachments ?? []));

/**
 * Extra time a message gets per MB of attachments (as stored, base64) beyond the limit its template
 * gets: writing and DKIM-signing 14 MB of source took 0.7 s on a loaded 2-core machine, so a 10 MB
 * attachment must not fail a limit set for runaway templates.
 */
const MILLIS_PER_ATTACHMENT_MB = 250;
const attachmentMb = (input: ThreadInput) => attachmentsOf(input).reduce((sum, a) => sum + a.content.length, 0) / 2 ** 20;
/** Posted work, in PIPELINE units; a slot whose job is slow, or whose recalled jobs have not come back, takes no more. */
const load = (slot: Slot) => {
  let sum = 0;
  for (const job of slot.jobs) sum += job.recalled ? PIPELINE : job.weight;
  return slot.slow ? PIPELINE : sum;
};

/**
 * A message still composing after this long is slow: its tenant's jobs posted behind it go back to
 * the queue (another tenant's message must not wait for a pipeline of slow ones). A tenant whose
 * messages take this long on average is slow: each of its messages has a thread to itself, and
 * one that waits too long may be given up (`giveUpAfterMs`). Real templates compose in 1–5 ms.
 */
export const SLOW_COMPOSE_MS = 100;
/** Tenants whose compose time the pool remembers (least recently used go first). */
const TENANTS_REMEMBERED = 10_000;
/** Weight of the newest compose time in a tenant's running average. */
const COST_SMOOTHING = 0.3;

/** A message not composed because its tenant's messages are slow and it waited too long for a thread (ComposePool.compose's `giveUpAfterMs`). */
export class ComposeDeferredError extends Error {
  constructor() {
    super("Composing was deferred: this tenant's messages are slow and the threads are busy");
    this.name = 'ComposeDeferredError';
  }
}

function revive(reply: NonNullable<Reply['error']>): Error {
  switch (reply.name) {
    case 'RenderLimitError':
      return new RenderLimitError(reply.message, reply.field === 'subject' || reply.field === 'body' ? reply.field : undefined);
    case 'TemplateSyntaxError':
      return new TemplateSyntaxError(reply.message, reply.field);
    case 'TemplateRenderError':
      return new TemplateRenderError(reply.message, reply.field);
    default:
      return new Error(reply.message);
  }
}

export type ComposeOptions = { ahead?: boolean; tenant?: string; giveUpAfterMs?: number };

/** Composing off the event loop; one per runtime, carried on the context (`ctx.threads.compose`). */
export type ComposePool = {
  /**
   * Renders, builds and signs one message, within RENDER_LIMITS.maxComposeMillis (more with
   * attachments). `ahead`: someone is waiting for it (a preview), so it goes before the queued
   * deliveries, behind at most the few already posted to a thread. Otherwise it waits in its
   * `tenant`'s queue, and the tenants share the threads by time (waitingWork), so one tenant's
   * backlog never sits in front of another's. `giveUpAfterMs`: when the tenant's messages are slow
   * (over SLOW_COMPOSE_MS on average) and this one has waited longer than this for a thread, it is
   * not composed but rejected with ComposeDeferredError, for the caller to try later. Work without
   * a tenant is one queue of its own, and is never given up, held alone or recalled.
   */
  compose(input: ComposeMessageInput, opts?: ComposeOptions): Promise<ComposedSource>;
  compose(input: ComposePartsInput, opts?: ComposeOptions): Promise<ComposedHtml>;
  /**
   * Syntax-checks template sources (field name to source) as `checkTemplates` does, ahead of the
   * queued deliveries, within the same limit: for sources whose parse would hold the event loop.
   */
  check(fields: Record<string, string>): Promise<FieldError[]>;
  /** A tenant's average compose time (ms, over its recent messages in this process); 0 when none is known. */
  costOf: (tenant: string) => number;
  /** Threads the pool runs at most. */
  size: number;
  /** Threads running now (idle ones end after IDLE_THREAD_MS). */
  threadCount: () => number;
  close: () => Promise<void>;
};

/**
 * Composing (Liquid render, footer, link tracking, plain text, MIME source, DKIM signature) runs
 * on a small pool of worker threads with a hard wall-clock limit: the in-render budgets are only
 * checked between template nodes, so a filter over a huge value could otherwise hold the event
 * loop. A thread that passes the limit is terminated (which stops any JavaScript) and replaced; its
 * email fails with a RenderLimitError. Threads start on first use, end after IDLE_THREAD_MS without
 * work, and do not keep the process alive.
 */
export function createComposePool(
  size = Math.max(1, Math.min(4, os.availableParallelism() - 1)),
  limitMillis: number = RENDER_LIMITS.maxComposeMillis,
  idleMillis: number = IDLE_THREAD_MS,
): ComposePool {
  const slots: Slot[] = Array.from({ length: size }, () => {
    const slot: Slot = {
      worker: null,
      jobs: [],
      running: null,
      slow: false,
      recall: newRecall(),
      returned: [],
      idle: idleTimer(idleMillis, () => retire(slot)),
    };
    return slot;
  });
  const costs = new LruCache<string, number>(TENANTS_REMEMBERED);
  const queue = waitingWork((tenant) => costs.get(tenant) ?? 0);
  let nextId = 0;

  /** Work someone waits on, or without a tenant, is not measured, given up, held alone or recalled. */
  const tenantOf = (job: Job) => (job.ahead ? '' : job.tenant);
  const noteCost = (job: Job, ms: number) => {
    if (tenantOf(job) === '') return;
    const before = costs.get(job.tenant);
    costs.set(job.tenant, before === undefined ? ms : before + COST_SMOOTHING * (ms - before));
  };
  const slowTenant = (job: Job) => tenantOf(job) !== '' && (costs.get(job.tenant) ?? 0) > SLOW_COMPOSE_MS;
  /** A delivery that waited past its `giveUpAfterMs` while its tenant's messages are slow. */
  const givenUp = (job: Job, now: number) => job.giveUpAfterMs !== null && now - job.queuedAt > job.giveUpAfterMs && slowTenant(job);

  function spawn(slot: Slot): Worker {
    slot.recall = newRecall();
    const worker = new Worker(new URL('./compose-worker.ts', import.meta.url), {
      workerData: { recall: slot.recall },
      resourceLimits: { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB },
    });
    worker.on('message', (m: Reply) => {
      if (slot.worker !== worker) return;
      if (m.started) return startClock(slot, m.id);
      const job = slot.jobs.find((j) => j.id === m.id);
      if (!job) return;
      if (slot.running?.id === m.id) {
        clearTimeout(slot.running.timer);
        slot.running = null;
        slot.slow = false;
      }
      slot.jobs = slot.jobs.filter((j) => j !== job);
      if (m.recalled) {
        slot.returned.push(job);
        if (!slot.jobs.some((j) => j.recalled)) queue.putBack(slot.returned.splice(0));
      } else {
        if (m.ms !== undefined) noteCost(job, m.ms);
        if (m.error) job.reject(revive(m.error));
        else job.resolve(m.result!);
      }
      settle(slot);
    });
    const dead = (err: Error) => {
      if (slot.worker !== worker) return;
      // The job it was running fails; the ones it had not started go to the next thread. A thread
      // that died before starting anything (it could not load) fails them all.
      stop(slot);
      const [failed, requeued] = slot.running
        ? [slot.jobs.filter((j) => j.id === slot.running!.id), slot.jobs.filter((j) => j.id !== slot.running!.id)]
        : [slot.jobs, []];
      if (slot.running) clearTimeout(slot.running.timer);
      slot.running = null;
      slot.slow = false;
      slot.jobs = [];
      for (const job of failed) job.reject(err);
      queue.putBack([...slot.returned.splice(0), ...requeued]);
      dispatch();
    };
    worker.on('error', dead);
    worker.on('exit', (code) => dead(new Error(`compose thread exited (${code})`)));
    worker.unref(); // after the listeners: attaching a 'message' listener refs the worker again
    return worker;
  }

  /** After a job settled: more work for the slot, or its idle clock. */
  function settle(slot: Slot): void {
    dispatch();
    if (slot.jobs.length === 0 && slot.worker) {
      slot.worker.unref();
      slot.idle.arm();
    }
  }

  function dispatch(): void {
    const now = performance.now();
    for (let job = queue.next(now, givenUp); job; job = queue.next(now, givenUp)) {
      const slot = slots.reduce((best, s) => (load(s) < load(best) ? s : best));
      const weight = attachmentsOf(job.input).length > 0 || slowTenant(job) ? PIPELINE : 1;
      if (slot.jobs.length > 0 && load(slot) + weight > PIPELINE) return;
      queue.take(job);
      const sent: Sent = { ...job, id: nextId++, weight };
      slot.idle.disarm();
      slot.worker ??= spawn(slot);
      slot.worker.ref(); // a message in progress keeps the process alive until it settles
      slot.jobs.push(sent);
      slot.worker.postMessage({ id: sent.id, input: sent.input });
    }
  }

  function stop(slot: Slot): void {
    const worker = slot.worker;
    slot.worker = null;
    if (worker) void worker.terminate();
  }

  function retire(slot: Slot): void {
    if (slot.jobs.length > 0 || !slot.worker) return;
    stop(slot);
    shrinkHeapAfterWork();
  }

  /**
   * The thread began composing job `id`: from now on it has `limitMillis`, plus time for its
   * attachments. Past SLOW_COMPOSE_MS it is slow: nothing more is posted to its thread, and if its
   * tenant has jobs posted behind it (likely as slow), the thread is told to start none of the jobs
   * posted so far (it knows only an id bound): each answers `recalled` and goes back to the front of
   * its queue (a preview's to the front of the previews), to be served in turn with the other
   * tenants' work. A slow job of work without a tenant, or of work someone waits on, recalls nothing.
   */
  function startClock(slot: Slot, id: number): void {
    if (slot.running) clearTimeout(slot.running.timer);
    slot.slow = false;
    // The job stays in slot.jobs until it settles, and settling clears this timer.
    const job = slot.jobs.find((j) => j.id === id);
    // It was recalled too late: the thread had already started it.
    if (job?.recalled) {
      delete job.recalled;
      if (!slot.jobs.some((j) => j.recalled)) {
        queue.putBack(slot.returned.splice(0));
        dispatch();
      }
    }
    const limit = limitMillis + (job ? Math.ceil(attachmentMb(job.input) * MILLIS_PER_ATTACHMENT_MB) : 0);
    const arm = (then: () => void, ms: number) => {
      const timer = setTimeout(then, ms);
      timer.unref();
      slot.running = { id, timer };
    };
    const overLimit = () => {
      // Terminating stops whatever the thread runs; its other jobs go to a fresh thread.
      slot.running = null;
      slot.slow = false;
      const requeued = slot.jobs.filter((j) => j.id !== id);
      slot.jobs = [];
      stop(slot);
      if (job) noteCost(job, limit);
      job?.reject(new RenderLimitError(`Composing the message took longer than ${limit} ms`));
      queue.putBack([...slot.returned.splice(0), ...requeued]);
      dispatch();
      if (slot.jobs.length === 0) slot.idle.arm();
    };
    const slow = () => {
      slot.slow = true;
      const behind = job && tenantOf(job) !== '' ? slot.jobs.filter((j) => j.id > id && tenantOf(j) === job.tenant) : [];
      for (const j of behind) j.recalled = true;
      if (behind.length > 0) Atomics.store(slot.recall, 0, BigInt(nextId));
      arm(overLimit, limit - SLOW_COMPOSE_MS);
    };
    if (limit > SLOW_COMPOSE_MS) arm(slow, SLOW_COMPOSE_MS);
    else arm(overLimit, limit);
  }

  const run = (input: ThreadInput, opts: ComposeOptions = {}) =>
    new Promise<ThreadResult>((resolve, reject) => {
      const ahead = opts.ahead ?? false;
      queue.add({ input, ahead, tenant: opts.tenant ?? '', giveUpAfterMs: opts.giveUpAfterMs ?? null, queuedAt: performance.now(), resolve, reject });
      dispatch();
    });
  return {
    // The thread answers a `message` input with its source, any other with the rendered parts (composeHtml's overloads).
    compose: ((input: ComposeHtmlInput, opts?: ComposeOptions) => run(input, opts)) as ComposePool['compose'],
    check: (fields) => run({ check: fields }, { ahead: true }) as Promise<FieldError[]>,
    costOf: (tenant) => costs.get(tenant) ?? 0,
    size,
    threadCount: () => slots.filter((slot) => slot.worker).length,
    close: async () => {
      const running = slots.flatMap((slot) => (slot.worker ? [slot.worker] : []));
      const stopped = new Error('The compose threads were stopped');
      for (const slot of slots) {
        slot.idle.disarm();
        slot.worker = null;
        if (slot.running) clearTimeout(slot.running.timer);
        slot.running = null;
        for (const job of [...slot.returned.splice(0), ...slot.jobs.splice(0)]) job.reject(stopped);
      }
      for (const job of queue.drain()) job.reject(stopped);
      await Promise.all(running.map((w) => w.terminate()));
    },
  };
}

/** The recall mark a pool shares with one thread (Slot.recall); a new thread gets a new one. */
const newRecall = () => new BigInt64Array(new SharedArrayBuffer(8));

/**
 * Work waiting for a thread: work someone waits on first, in the order asked; then the tenants'
 * queues, shared by thread time (start-time fair queuing): each tenant has a virtual finish time,
 * advanced by its average compose time (`costOf`) for every job taken, and the next job is the
 * head of the queue whose tenant would start earliest. A tenant whose messages take 500 ms gets one
 * taken for every 500 of another's that take 1 ms, so its backlog delays another tenant's next
 * message by about the one it is running, not by all of them. A tenant keeps its finish time while
 * it is ahead of the others, even with nothing queued, so emptying its queue earns it nothing.
 */
function waitingWork(costOf: (tenant: string) => number) {
  const ahead: Job[] = [];
  type Tenant = { jobs: Job[]; finish: number };
  const tenants = new Map<string, Tenant>();
  /** Virtual time: the start of the job taken last. */
  let clock = 0;
  const queueOf = (tenant: string) => {
    let found = tenants.get(tenant);
    if (!found) tenants.set(tenant, (found = { jobs: [], finish: clock }));
    return found.jobs;
  };
  return {
    add(job: Job): void {
      if (job.ahead) ahead.push(job);
      else queueOf(job.tenant).push(job);
    },
    /** Jobs taken back from a thread that never started them: in front of their queues, in their order. */
    putBack(jobs: Sent[]): void {
      for (const job of jobs.toReversed()) {
        delete job.recalled; // `dispatch` posts a copy of the job, with a new id
        if (job.ahead) ahead.unshift(job);
        else queueOf(job.tenant).unshift(job);
      }
    },
    /** The job to post next (left in its queue until `take`); on the way, rejects the deliveries `givenUp` at the heads of the queues. */
    next(now: number, givenUp: (job: Job, now: number) => boolean): Job | undefined {
      if (ahead.length > 0) return ahead[0];
      let first: Tenant | undefined;
      for (const [name, tenant] of tenants) {
        while (tenant.jobs.length > 0 && givenUp(tenant.jobs[0], now)) tenant.jobs.shift()!.reject(new ComposeDeferredError());
        if (tenant.jobs.length === 0) {
          if (tenant.finish <= clock) tenants.delete(name);
        } else if (!first || tenant.finish < first.finish) first = tenant;
      }
      return first?.jobs[0];
    },
    /** Removes `job`, just returned by `next`, and charges its tenant for it. */
    take(job: Job): void {
      if (job.ahead) {
        ahead.shift();
        return;
      }
      const tenant = tenants.get(job.tenant)!;
      tenant.jobs.shift();
      clock = Math.max(clock, tenant.finish);
      tenant.finish = clock + Math.max(1, costOf(job.tenant));
    },
    drain(): Job[] {
      const all = [...ahead.splice(0), ...[...tenants.values()].flatMap((t) => t.jobs)];
      tenants.clear();
      return all;
    },
  };
}
