/** A poller's wait between polls, which `end` cuts short (a wake, or stopping). */
export type Pause = {
  /** Resolves after `ms`, or as soon as `end` is called. */
  wait: (ms: number) => Promise<void>;
  /** Ends the wait under way; false when there is none. */
  end: () => boolean;
};

export function pausable(): Pause {
  let ending: (() => void) | null = null;
  return {
    wait: (ms) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          ending = null;
          resolve();
        }
        ending = done;
      }),
    end: () => {
      if (!ending) return false;
      ending();
      return true;
    },
  };
}
