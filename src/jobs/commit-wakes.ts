import { performance } from 'node:perf_hooks';

/**
 * Commits wake a queue's poller at most once in this long (the first at once, the jobs of the
 * others fetched together at the window's end): a lone send is fetched as it commits, and a steady
 * stream of sends is still fetched in batches. Waking a poller at every commit made each email's
 * batch one email: at 100 sends a second the machine went from 42–47 to 63–69 % busy (bench/README.md
 * § send, twenty-fifth session).
 */
export const COMMIT_WAKE_MS = 100;

/** `wake(queue)` calls `fire(queue)` at once, or at the end of the queue's last `ms` if it fired within it. */
export function throttledWakes(ms: number, fire: (queue: string) => void): { wake: (queue: string) => void; stop: () => void } {
  const last = new Map<string, number>();
  const pending = new Map<string, NodeJS.Timeout>();
  let stopped = false;
  const fireNow = (queue: string) => {
    pending.delete(queue);
    last.set(queue, performance.now());
    if (!stopped) fire(queue);
  };
  return {
    wake: (queue) => {
      if (stopped || pending.has(queue)) return;
      const since = performance.now() - (last.get(queue) ?? -Infinity);
      if (since >= ms) fireNow(queue);
      else pending.set(queue, setTimeout(fireNow, ms - since, queue));
    },
    stop: () => {
      stopped = true;
      for (const timer of pending.values()) clearTimeout(timer);
      pending.clear();
    },
  };
}
