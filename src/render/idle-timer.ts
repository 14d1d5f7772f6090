/** A thread with no work for this long ends (its memory goes back); the next piece of work starts a new one. */
export const IDLE_THREAD_MS = 60_000;

/**
 * The young generation of the compose threads. `npm start`'s --max-semi-space-size=16
 * (chosen for the API's latency) lets each thread's grow to 48 MB of garbage between scavenges;
 * 12 MB keeps a 20,000-message campaign's peak ~30 MB lower at the same rate (bench/README § send).
 */
export const THREAD_YOUNG_GENERATION_MB = 12;

/** A timer that calls `onIdle` once `ms` have passed since the last `arm()`, unless disarmed first. It never keeps the process alive. */
export function idleTimer(ms: number, onIdle: () => void): { arm: () => void; disarm: () => void } {
  let timer: NodeJS.Timeout | null = null;
  const disarm = () => {
    if (timer) clearTimeout(timer);
    timer = null;
  };
  return {
    arm: () => {
      disarm();
      timer = setTimeout(() => {
        timer = null;
        onIdle();
      }, ms);
      timer.unref();
    },
    disarm,
  };
}
