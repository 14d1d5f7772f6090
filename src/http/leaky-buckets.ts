/**
 * Projects a set of buckets remembers at most (each a few dozen bytes): those drained to nothing
 * are forgotten once a minute, and past this many, the least recently filled.
 */
const MAX_KEYS = 100_000;
const SWEEP_MS = 60_000;

/**
 * A leaky bucket per key (a project, say), in one process: what was added, draining at `leakPerMs`
 * of the clock. The heavy reads' time budget (heavy-reads.ts) and the recent writes the disk floor
 * looks at (disk-floor.ts) are kept in these.
 */
export type LeakyBuckets = {
  /** What the key's bucket holds now. */
  level(key: string): number;
  /** Whole seconds until the key's bucket has drained to `limit`: 0 when it holds no more than that now. */
  secondsAbove(key: string, limit: number): number;
  /** Adds `amount` to the key's bucket. */
  add(key: string, amount: number): void;
};

export function leakyBuckets(leakPerMs: number, now: () => number = () => performance.now()): LeakyBuckets {
  const filled = new Map<string, { amount: number; at: number }>();
  let sweptAt = now();
  const levelAt = (key: string, t: number): number => {
    const entry = filled.get(key);
    return entry ? Math.max(0, entry.amount - (t - entry.at) * leakPerMs) : 0;
  };
  const forgetDrained = (t: number) => {
    for (const [key, entry] of filled) if (entry.amount - (t - entry.at) * leakPerMs <= 0) filled.delete(key);
  };
  return {
    level: (key) => levelAt(key, now()),
    secondsAbove: (key, limit) => Math.max(0, Math.ceil((levelAt(key, now()) - limit) / leakPerMs / 1000)),
    add(key, amount) {
      const t = now();
      const level = levelAt(key, t);
      filled.delete(key); // re-inserted last: the map's order is by last fill
      filled.set(key, { amount: level + amount, at: t });
      if (t - sweptAt > SWEEP_MS || filled.size > MAX_KEYS) {
        sweptAt = t;
        forgetDrained(t);
        for (const key of filled.keys()) {
          if (filled.size <= MAX_KEYS) break;
          filled.delete(key); // the least recently filled
        }
      }
    },
  };
}
