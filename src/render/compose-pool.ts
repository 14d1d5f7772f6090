import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { FieldError } from '../http/errors.ts';
import type { ComposedHtml, ComposedSource, ComposeHtmlInput, ComposeMessageInput, ComposePartsInput } from './compose-html.ts';
import { RENDER_LIMITS, RenderLimitError } from './limits.ts';
import { TemplateRenderError, TemplateSyntaxError } from './engine.ts';
import { shrinkHeapAfterWork } from '../memory-reducer.ts';
import { IDLE_THREAD_MS, THREAD_YOUNG_GENERATION_MB, idleTimer } from './idle-timer.ts';

/** What a thread does: compose a message, or syntax-check template sources (answered with their field errors). */
export type ThreadInput = ComposeHtmlInput | { check: Record<string, string> };
type ThreadResult = ComposedHtml | ComposedSource | FieldError[];
type Job = { input: ThreadInput; ahead: boolean; resolve: (r: ThreadResult) => void; reject: (e: Error) => void };
type Reply = { id: number; started?: true; result?: ThreadResult; error?: { name: string; message: string; field?: string } };
type Sent = Job & { id: number };
/** A thread and the jobs posted to it, in the order it runs them; `running` has its clock started. */
type Slot = {
  worker: Worker | null;
  jobs: Sent[];
  running: { id: number; timer: NodeJS.Timeout } | null;
  idle: ReturnType<typeof idleTimer>;
};

/**
 * Jobs posted to a thread ahead of the one it runs: the thread starts the next as soon as it has
 * answered one, instead of waiting for a busy event loop to read the answer and post again.
 */
const PIPELINE = 8;

/** A message with attachments is posted only to an idle thread, and nothing behind it: a thread holds at most one large input. */
const attachmentsOf = (input: ThreadInput) => ('check' in input ? [] : (input.message?.attachments ?? []));
const weight = (input: ThreadInput) => (attachmentsOf(input).length ? PIPELINE : 1);

/**
 * Extra time a message gets per MB of attachments (as stored, base64) beyond the limit its template
 * gets: writing and DKIM-signing 14 MB of source took 0.7 s on a loaded 2-core machine, so a 10 MB
 * attachment must not fail a limit set for runaway templates.
 */
const MILLIS_PER_ATTACHMENT_MB = 250;
const attachmentMb = (input: ThreadInput) => attachmentsOf(input).reduce((sum, a) => sum + a.content.length, 0) / 2 ** 20;
const load = (slot: Slot) => slot.jobs.reduce((sum, job) => sum + weight(job.input), 0);

function revive(reply: NonNullable<Reply['error']>): Error {
  switch (reply.name) {
    case 'RenderLimitError':
      return new RenderLimitError(reply.message);
    case 'TemplateSyntaxError':
      return new TemplateSyntaxError(reply.message, reply.field);
    case 'TemplateRenderError':
      return new TemplateRenderError(reply.message, reply.field);
    default:
      return new Error(reply.message);
  }
}

/** Composing off the event loop; one per runtime, carried on the context (`ctx.threads.compose`). */
export type ComposePool = {
  /**
   * Renders, builds and signs one message, within RENDER_LIMITS.maxComposeMillis (more with
   * attachments). `ahead`: someone is waiting for it (a preview), so it goes before the queued
   * deliveries, behind at most the few already posted to a thread.
   */
  compose(input: ComposeMessageInput, opts?: { ahead?: boolean }): Promise<ComposedSource>;
  compose(input: ComposePartsInput, opts?: { ahead?: boolean }): Promise<ComposedHtml>;
  /**
   * Syntax-checks template sources (field name to source) as `checkTemplates` does, ahead of the
   * queued deliveries, within the same limit: for sources whose parse would hold the event loop.
   */
  check(fields: Record<string, string>): Promise<FieldError[]>;
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
    const slot: Slot = { worker: null, jobs: [], running: null, idle: idleTimer(idleMillis, () => retire(slot)) };
    return slot;
  });
  const queue: Job[] = [];
  let nextId = 0;

  function spawn(slot: Slot): Worker {
    const worker = new Worker(new URL('./compose-worker.ts', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB } });
    worker.on('message', (m: Reply) => {
      if (slot.worker !== worker) return;
      if (m.started) return startClock(slot, m.id);
      const job = slot.jobs.find((j) => j.id === m.id);
      if (!job) return;
      if (slot.running?.id === m.id) {
        clearTimeout(slot.running.timer);
        slot.running = null;
      }
      slot.jobs = slot.jobs.filter((j) => j !== job);
      if (m.error) job.reject(revive(m.error));
      else job.resolve(m.result!);
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
      slot.jobs = [];
      for (const job of failed) job.reject(err);
      queue.unshift(...requeued);
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
    while (queue.length > 0) {
      const slot = slots.reduce((best, s) => (load(s) < load(best) ? s : best));
      if (slot.jobs.length > 0 && load(slot) + weight(queue[0].input) > PIPELINE) return;
      const job: Sent = { ...queue.shift()!, id: nextId++ };
      slot.idle.disarm();
      slot.worker ??= spawn(slot);
      slot.worker.ref(); // a message in progress keeps the process alive until it settles
      slot.jobs.push(job);
      slot.worker.postMessage({ id: job.id, input: job.input });
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

  /** The thread began composing job `id`: from now on it has `limitMillis`, plus time for its attachments. */
  function startClock(slot: Slot, id: number): void {
    if (slot.running) clearTimeout(slot.running.timer);
    // The job stays in slot.jobs until it settles, and settling clears this timer.
    const job = slot.jobs.find((j) => j.id === id);
    const limit = limitMillis + (job ? Math.ceil(attachmentMb(job.input) * MILLIS_PER_ATTACHMENT_MB) : 0);
    const timer = setTimeout(() => {
      // Terminating stops whatever the thread runs; its other jobs go to a fresh thread.
      slot.running = null;
      const requeued = slot.jobs.filter((j) => j.id !== id);
      slot.jobs = [];
      stop(slot);
      job?.reject(new RenderLimitError(`Composing the message took longer than ${limit} ms`));
      queue.unshift(...requeued);
      dispatch();
      if (slot.jobs.length === 0) slot.idle.arm();
    }, limit);
    timer.unref();
    slot.running = { id, timer };
  }

  /** Queues work; work someone waits on goes behind the other such work, before the rest. */
  const run = (input: ThreadInput, ahead: boolean) =>
    new Promise<ThreadResult>((resolve, reject) => {
      const job = { input, ahead, resolve, reject };
      const firstBehind = ahead ? queue.findIndex((queued) => !queued.ahead) : -1;
      queue.splice(firstBehind === -1 ? queue.length : firstBehind, 0, job);
      dispatch();
    });
  return {
    // The thread answers a `message` input with its source, any other with the rendered parts (composeHtml's overloads).
    compose: ((input: ComposeHtmlInput, opts?: { ahead?: boolean }) => run(input, opts?.ahead ?? false)) as ComposePool['compose'],
    check: (fields) => run({ check: fields }, true) as Promise<FieldError[]>,
    threadCount: () => slots.filter((slot) => slot.worker).length,
    close: async () => {
      const running = slots.flatMap((slot) => (slot.worker ? [slot.worker] : []));
      const stopped = new Error('The compose threads were stopped');
      for (const slot of slots) {
        slot.idle.disarm();
        slot.worker = null;
        if (slot.running) clearTimeout(slot.running.timer);
        slot.running = null;
        for (const job of slot.jobs.splice(0)) job.reject(stopped);
      }
      for (const job of queue.splice(0)) job.reject(stopped);
      await Promise.all(running.map((w) => w.terminate()));
    },
  };
}
