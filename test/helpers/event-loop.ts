import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * The longest event-loop stall (ms) while `work` runs. The test server runs in the test's own
 * process, so this is the server's loop.
 */
export async function stallDuring<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  try {
    return { result: await work(), stallMs: delay.max / 1e6 };
  } finally {
    delay.disable();
  }
}
