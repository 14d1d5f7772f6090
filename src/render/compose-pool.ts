import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { ComposedHtml, ComposeHtmlInput } from './compose-html.ts';
import { RENDER_LIMITS, RenderLimitError } from './limits.ts';
import { TemplateRenderError, TemplateSyntaxError } from './engine.ts';
import { IDLE_THREAD_MS, idleTimer } from './idle-timer.ts';

type Job = { input: ComposeHtmlInput; resolve: (r: ComposedHtml) => void; reject: (e: Error) => void };
type Reply = { id: number; started?: true; result?: ComposedHtml; error?: { name: string; message: string; field?: string } };
type Slot = { worker: Worker | null; job: (Job & { id: number; timer: NodeJS.Timeout | null }) | null; idle: ReturnType<typeof idleTimer> };

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
  /** Renders and composes one message's content, within RENDER_LIMITS.maxComposeMillis. */
  compose: (input: ComposeHtmlInput) => Promise<ComposedHtml>;
  /** Threads running now (idle ones end after IDLE_THREAD_MS). */
  threadCount: () => number;
  close: () => Promise<void>;
};

/**
 * Composing (Liquid render, footer, link tracking, plain text) runs on a small pool of worker
 * threads with a hard wall-clock limit: the in-render budgets are only checked between template
 * nodes, so a filter over a huge value could otherwise hold the event loop. A thread that passes
 * the limit is terminated (which stops any JavaScript) and replaced; its email fails with a
 * RenderLimitError. Threads start on first use, end after IDLE_THREAD_MS without work, and do not
 * keep the process alive.
 */
export function createComposePool(
  size = Math.max(1, Math.min(4, os.availableParallelism() - 1)),
  limitMillis: number = RENDER_LIMITS.maxComposeMillis,
  idleMillis: number = IDLE_THREAD_MS,
): ComposePool {
  const slots: Slot[] = Array.from({ length: size }, () => {
    const slot: Slot = { worker: null, job: null, idle: idleTimer(idleMillis, () => retire(slot)) };
    return slot;
  });
  const queue: Job[] = [];
  let nextId = 0;

  function spawn(slot: Slot): Worker {
    const worker = new Worker(new URL('./compose-worker.ts', import.meta.url));
    const finish = (id: number | null, outcome: { result?: ComposedHtml; error?: Error }) => {
      const job = slot.job;
      if (!job || (id !== null && job.id !== id)) return;
      if (job.timer) clearTimeout(job.timer);
      slot.job = null;
      worker.unref();
      if (outcome.error) job.reject(outcome.error);
      else job.resolve(outcome.result!);
      dispatch();
      if (!slot.job && slot.worker === worker) slot.idle.arm();
    };
    worker.on('message', (m: Reply) => {
      if (m.started) startClock(slot, worker, m.id);
      else finish(m.id, m.error ? { error: revive(m.error) } : { result: m.result });
    });
    const dead = (err: Error) => {
      if (slot.worker !== worker) return;
      slot.worker = null;
      finish(null, { error: err });
    };
    worker.on('error', dead);
    worker.on('exit', (code) => dead(new Error(`compose thread exited (${code})`)));
    worker.unref(); // after the listeners: attaching a 'message' listener refs the worker again
    return worker;
  }

  function dispatch(): void {
    for (const slot of slots) {
      if (slot.job || queue.length === 0) continue;
      const job = queue.shift()!;
      slot.idle.disarm();
      slot.worker ??= spawn(slot);
      const worker = slot.worker;
      const id = nextId++;
      slot.job = { ...job, id, timer: null };
      worker.ref(); // a message in progress keeps the process alive until it settles
      worker.postMessage({ id, input: job.input });
    }
  }

  function retire(slot: Slot): void {
    const worker = slot.worker;
    if (slot.job || !worker) return;
    slot.worker = null;
    void worker.terminate();
  }

  /** The thread began composing job `id`: from now on it has `limitMillis`. */
  function startClock(slot: Slot, worker: Worker, id: number): void {
    const job = slot.job;
    if (!job || job.id !== id || slot.worker !== worker) return;
    job.timer = setTimeout(() => {
      // Terminating stops whatever the thread runs; the next job gets a fresh thread.
      slot.worker = null;
      slot.job = null;
      void worker.terminate();
      job.reject(new RenderLimitError(`Composing the message took longer than ${limitMillis} ms`));
      dispatch();
    }, limitMillis);
    job.timer.unref();
  }

  return {
    compose: (input) =>
      new Promise((resolve, reject) => {
        queue.push({ input, resolve, reject });
        dispatch();
      }),
    threadCount: () => slots.filter((slot) => slot.worker).length,
    close: async () => {
      const running = slots.flatMap((slot) => (slot.worker ? [slot.worker] : []));
      const stopped = new Error('The compose threads were stopped');
      for (const slot of slots) {
        slot.idle.disarm();
        slot.worker = null;
        if (slot.job?.timer) clearTimeout(slot.job.timer);
        slot.job?.reject(stopped);
        slot.job = null;
      }
      for (const job of queue.splice(0)) job.reject(stopped);
      await Promise.all(running.map((w) => w.terminate()));
    },
  };
}
