import { type BusySlots, busySlots } from './busy-slots.ts';

/**
 * Reads a request waits for whose cost grows with what the project stored: a condition counted
 * over its contacts (a segment's count or members, a campaign's audience) and its events counted
 * over a range (GET /events/stats). Each holds a pooled connection and a PostgreSQL backend for up
 * to its statement bound (10 s: conditions/time-bound.ts, events/list.ts). Without a cap, twenty at
 * once from one project (open sign-up, well within 1,000 requests a minute) held the API process's
 * whole pool, and every other project's requests queued behind them.
 */
export const HEAVY_READS_PER_PROJECT = 2;

/** Heavy reads of all projects at once in a process: a quarter of its pool, so the rest stays free for everything else. */
export const heavyReadsPerProcess = (databasePoolSize: number): number => Math.max(1, Math.floor(databasePoolSize / 4));

/** The counters of heavy reads under way (ctx.heavyReads). */
export const heavyReadSlots = (databasePoolSize: number): BusySlots =>
  busySlots({
    perProject: HEAVY_READS_PER_PROJECT,
    perProcess: heavyReadsPerProcess(databasePoolSize),
    projectBusy: `This project already has ${HEAVY_READS_PER_PROJECT} counts over its contacts or events under way`,
    processBusy: 'The server is busy counting for other requests',
  });

/** `work` in one of the project's heavy-read slots, or a 429 at once (RATE_LIMIT_EXCEEDED, Retry-After: 1) when none is free. */
export async function asHeavyRead<T>(slots: BusySlots, projectId: string, work: () => Promise<T>): Promise<T> {
  const release = slots.take(projectId);
  try {
    return await work();
  } finally {
    release();
  }
}
