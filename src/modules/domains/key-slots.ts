import { busySlots } from '../../http/busy-slots.ts';

/**
 * Turns at adding a domain (generating its DKIM key), per process.
 *
 * RSA-2048 generation runs on libuv's threadpool (4 threads), which password hashing, static file
 * reads and dns.lookup share: 600 concurrent adds from one project once took every thread for
 * 20-40 s and a login elsewhere waited 8-15 s. So one key is generated at a time (~40 ms, at worst
 * ~250 ms); adds wait their turn, taken in rotation across projects, so another project's add waits
 * one turn per project ahead of it, not behind a whole burst; past the bounds an add gets 429 at once.
 */
export const KEYS_AT_ONCE = 1;
/**
 * Adds under way (generating or waiting) per project: twice the 50 domains a project may have, so
 * a burst just past the cap still gets the cap's 403 from the adds that reach their turn.
 */
export const KEY_TURNS_PER_PROJECT = 100;
/** Adds under way in the process: bounds the requests held waiting (a few KB each). */
export const KEY_TURNS_PER_PROCESS = 1000;

export type KeyTurns = {
  /** Runs `work` at the project's turn, or throws 429 RATE_LIMIT_EXCEEDED at once past the bounds. */
  run<T>(projectId: string, work: () => Promise<T>): Promise<T>;
  /** Adds under way (generating or waiting), for the project or in all. */
  inFlight(projectId?: string): number;
};

export function keyTurns(atOnce = KEYS_AT_ONCE, perProcess = KEY_TURNS_PER_PROCESS, perProject = KEY_TURNS_PER_PROJECT): KeyTurns {
  const admitted = busySlots({
    perProject,
    perProcess,
    projectBusy: 'This project is already adding domains',
    processBusy: 'The server is busy adding domains',
  });
  let running = 0;
  /** Waiting adds by project; the Map's order is the rotation (a served project moves to the back). */
  const waiting = new Map<string, (() => void)[]>();
  const acquire = (projectId: string): Promise<void> => {
    if (running < atOnce) {
      running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const queue = waiting.get(projectId);
      if (queue) queue.push(resolve);
      else waiting.set(projectId, [resolve]);
    });
  };
  const release = () => {
    const first = waiting.entries().next();
    if (first.done) {
      running--;
      return;
    }
    const [projectId, queue] = first.value;
    waiting.delete(projectId);
    const next = queue.shift()!;
    if (queue.length > 0) waiting.set(projectId, queue);
    // The turn passes straight from the releasing add to this one: `running` stays the same.
    next();
  };
  return {
    async run(projectId, work) {
      const leave = admitted.take(projectId);
      try {
        await acquire(projectId);
        try {
          return await work();
        } finally {
          release();
        }
      } finally {
        leave();
      }
    },
    inFlight: (projectId) => admitted.inFlight(projectId),
  };
}
