/**
 * Runs `work` while watching this process (test servers run in it): the longest event-loop stall
 * (a 10 ms ticker's longest late tick), the peak RSS growth in MB, and how long `work` took.
 */
export async function watchProcess<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; stallMs: number; rssMB: number }> {
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  let last = performance.now();
  let stallMs = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last - 10);
    last = now;
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 10);
  const t0 = performance.now();
  try {
    const result = await work();
    const ms = performance.now() - t0;
    peak = Math.max(peak, process.memoryUsage().rss);
    return { result, ms, stallMs, rssMB: (peak - rss0) / 1e6 };
  } finally {
    clearInterval(tick);
  }
}
