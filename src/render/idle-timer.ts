/** A thread with no work for this long ends (its memory goes back); the next piece of work starts a new one. */
export const IDLE_THREAD_MS = 60_000;

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
