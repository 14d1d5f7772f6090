import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { shrinkHeapAfterWork } from '../memory-reducer.ts';
import { IDLE_THREAD_MS, THREAD_YOUNG_GENERATION_MB, idleTimer } from '../render/idle-timer.ts';

export type DkimKey = { domain: string; selector: string; privateKeyPem: string };

/** DKIM signing off the event loop; one per runtime, carried on the context (`ctx.threads.dkim`). */
export type DkimSigner = {
  /** Prepends a DKIM-Signature for the sender domain. */
  sign: (raw: Buffer, key: DkimKey) => Promise<Buffer>;
  /** Threads running now (idle ones end after IDLE_THREAD_MS). */
  threadCount: () => number;
  close: () => Promise<void>;
};

type Pending = { resolve: (signatures: string) => void; reject: (err: Error) => void };

/**
 * DKIM signing (relaxed/relaxed, rsa-sha256) on a small pool of worker threads: an RSA-2048
 * signature is the largest CPU cost of a message, and the threads let it use every core while
 * the event loop keeps sending. Threads start on first use, end after IDLE_THREAD_MS without a
 * signature to make, and do not keep the process alive (unref).
 */
export function createDkimSigner(size = Math.max(1, Math.min(4, os.availableParallelism() - 1)), idleMillis = IDLE_THREAD_MS): DkimSigner {
  let workers: Worker[] = [];
  const pending = new Map<number, Pending>();
  let nextId = 0;
  const idle = idleTimer(idleMillis, () => {
    if (pending.size > 0) return;
    const running = workers;
    workers = [];
    for (const w of running) void w.terminate();
    if (running.length > 0) shrinkHeapAfterWork();
  });

  const pool = (): Worker[] => {
    if (workers.length > 0) return workers;
    workers = Array.from({ length: size }, () => {
      const w = new Worker(new URL('./dkim-worker.ts', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB } });
      w.on('message', (m: { id: number; signatures: string | null; error: string | null }) => {
        const p = pending.get(m.id);
        pending.delete(m.id);
        if (!p) return;
        if (m.signatures) p.resolve(m.signatures);
        else p.reject(new Error(`DKIM signing failed: ${m.error}`));
      });
      const fail = (err: Error) => {
        if (!workers.includes(w)) return; // a retired thread's exit
        for (const [id, p] of pending) {
          pending.delete(id);
          p.reject(err);
        }
        workers = [];
      };
      w.on('error', fail);
      w.on('exit', (code) => fail(new Error(`DKIM signer thread exited (${code})`)));
      w.unref(); // after the listeners: attaching a 'message' listener refs the worker again
      return w;
    });
    return workers;
  };

  return {
    sign: async (raw, key) => {
      const id = nextId++;
      idle.disarm();
      const ws = pool();
      try {
        const signatures = await new Promise<string>((resolve, reject) => {
          pending.set(id, { resolve, reject });
          ws[id % ws.length].postMessage({ id, raw, domain: key.domain, selector: key.selector, privateKeyPem: key.privateKeyPem });
        });
        return Buffer.concat([Buffer.from(signatures), raw]);
      } finally {
        if (pending.size === 0 && workers.length > 0) idle.arm();
      }
    },
    threadCount: () => workers.length,
    close: async () => {
      idle.disarm();
      const running = workers;
      workers = [];
      await Promise.all(running.map((w) => w.terminate()));
    },
  };
}
