import type { Database, Db } from '../db/client.ts';
import { answerTimeout, withStatementTimeout } from '../db/statement-timeout.ts';
import { busySlots } from './busy-slots.ts';
import { leakyBuckets } from './leaky-buckets.ts';
import { ApiError, busyAtLimit } from './errors.ts';

/**
 * Reads a request waits for whose cost grows with what the project stored: a condition counted
 * over its contacts (a segment's count, members or compute, a campaign's audience), its events
 * counted over a range (GET /events/stats; the activity and top events' counts when a range's
 * partial days hold many: events/day-counts.ts), its contact fields, a search or a subscription
 * filter of its contacts (modules/contacts/heavy-read.ts), and a list of its emails, or of one
 * contact's events, that reads many (modules/emails/service.ts, events/list.ts). Each holds a
 * pooled connection
 * and a PostgreSQL backend for up to its statement bound (10 s: conditions/time-bound.ts,
 * events/list.ts). Without a cap, twenty at once from one project (open sign-up, well within
 * 1,000 requests a minute) held the API process's whole pool, and every other project's requests
 * queued behind them.
 */
export const HEAVY_READS_PER_PROJECT = 2;

/** Heavy reads of all projects at once in a process: a quarter of its pool, so the rest stays free for everything else. */
export const heavyReadsPerProcess = (databasePoolSize: number): number => Math.max(1, Math.floor(databasePoolSize / 4));

/**
 * The time a project's heavy reads may take, in a process: up to `burstMs` at once, then
 * `sustainedShare` of the time (by default a quarter: HEAVY_READ_SECONDS_PER_MINUTE, 15 s a
 * minute; 120, two slots' whole minute, lifts it). The slots alone bound how many run
 * at once, not for how long: two counts over a million contacts, one after the other without
 * end, kept two PostgreSQL backends busy for as long as the project liked (bench/README.md
 * § hostile-reads). A person editing a segment over a million contacts (a count a second or so)
 * stays well inside it; a script that counts without pause is slowed to a quarter of a backend.
 */
export const heavyReadTime = (secondsPerMinute: number) => ({ burstMs: 60_000, sustainedShare: secondsPerMinute / 60 });
export const HEAVY_READ_TIME = heavyReadTime(15);

/** A leaky bucket of milliseconds per project: what its heavy reads took, draining at `sustainedShare` of the clock. */
export type TimeBudget = {
  /** Throws a 429 while the project's spent time is past the burst, saying when it is back under. */
  check(projectId: string): void;
  /** Adds what a read took. */
  charge(projectId: string, ms: number): void;
  /** The project's spent time now, in ms (for tests). */
  spent(projectId: string): number;
};

export function timeBudget(opts: { burstMs: number; sustainedShare: number; busy: string }): TimeBudget {
  const spent = leakyBuckets(opts.sustainedShare);
  return {
    check(projectId) {
      const wait = spent.secondsAbove(projectId, opts.burstMs);
      if (wait > 0) throw busyAtLimit(opts.busy, opts.burstMs / 1000, wait);
    },
    charge: spent.add,
    spent: spent.level,
  };
}

/**
 * How long a heavy read waits for one of the process's slots when all are taken, before its 429.
 * Each project has at most one read waiting, and they are served in the order they came: while
 * the slots are full, a freed one goes to the next project in line, however many reads the
 * projects ahead of it have run. Without the line, twenty projects of one hostile party, each
 * within its share, could keep the slots full, and every other project's count was a 429 at once.
 */
export const HEAVY_READ_WAIT_MS = 5_000;
/** Reads waiting at most, all projects together: past it, the 429 at once. */
const MAX_WAITING = 1_000;

/** The process's heavy-read slots: per project at once, and in all, with a line of one read per project waiting for the latter. */
export type HeavyReadSlots = {
  /** A slot for the project (its release, idempotent): at once, after waiting its turn, or a 429. */
  take(projectId: string): Promise<() => void>;
  /** Running for the project, or in all. */
  inFlight(projectId?: string): number;
  /** Waiting for a slot, all projects together. */
  waiting(): number;
};

type Waiter = { projectId: string; grant: () => void; timer?: NodeJS.Timeout };

export function heavyReadSlots(opts: { perProject: number; perProcess: number; waitMs: number; projectBusy: string; processBusy: string }): HeavyReadSlots {
  const running = busySlots(opts);
  const line: Waiter[] = [];
  const waitingOf = (projectId: string) => line.some((w) => w.projectId === projectId);
  const busy = (reason: string, limit: number) => busyAtLimit(reason, limit, RETRY_AFTER_SECONDS);
  // Only called with a slot free for the project and the process (so `take` does not throw); its
  // release hands the slot to the next read in line.
  const start = (projectId: string): (() => void) => {
    const release = running.take(projectId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      const next = line.shift();
      if (next) {
        clearTimeout(next.timer);
        next.grant();
      }
    };
  };
  return {
    take(projectId) {
      const ofProject = running.inFlight(projectId) + (waitingOf(projectId) ? 1 : 0);
      if (ofProject >= opts.perProject) return Promise.reject(busy(opts.projectBusy, opts.perProject));
      if (running.inFlight() < opts.perProcess && line.length === 0) return Promise.resolve(start(projectId));
      if (waitingOf(projectId) || line.length >= MAX_WAITING) return Promise.reject(busy(opts.processBusy, opts.perProcess));
      return new Promise((resolve, reject) => {
        const waiter: Waiter = { projectId, grant: () => resolve(start(projectId)) };
        waiter.timer = setTimeout(() => {
          line.splice(line.indexOf(waiter), 1);
          reject(busy(opts.processBusy, opts.perProcess));
        }, opts.waitMs);
        line.push(waiter);
      });
    },
    inFlight: running.inFlight,
    waiting: () => line.length,
  };
}

const RETRY_AFTER_SECONDS = 1;

/** A process's heavy reads: how many run at once (slots) and how long a project's took lately (time). */
export type HeavyReads = { slots: HeavyReadSlots; time: TimeBudget };

/** The counters of heavy reads under way, and each project's time (ctx.heavyReads). */
export const heavyReads = (databasePoolSize: number, time = HEAVY_READ_TIME, waitMs = HEAVY_READ_WAIT_MS): HeavyReads => ({
  slots: heavyReadSlots({
    perProject: HEAVY_READS_PER_PROJECT,
    perProcess: heavyReadsPerProcess(databasePoolSize),
    waitMs,
    projectBusy: `This project already has ${HEAVY_READS_PER_PROJECT} counts, searches or long lists over its stored data under way`,
    processBusy: 'The server is busy counting and searching for other requests',
  }),
  time: timeBudget({
    ...time,
    busy: `This project's counts, searches and long lists over its stored data have taken more than ${time.burstMs / 1000} s lately; past that, their share is ${(time.sustainedShare * 60).toFixed(0)} s a minute`,
  }),
});

/**
 * `work` in one of the project's heavy-read slots, or a 429 (RATE_LIMIT_EXCEEDED): at once with
 * Retry-After 1 when the project's own are taken, after HEAVY_READ_WAIT_MS in line when the
 * process's stay taken, or at once with the seconds until the project's time is back under its
 * burst. What `work` took is charged to the project, whatever it answered.
 */
export async function asHeavyRead<T>(reads: HeavyReads, projectId: string, work: () => Promise<T>): Promise<T> {
  reads.time.check(projectId);
  const release = await reads.slots.take(projectId);
  const started = performance.now();
  try {
    return await work();
  } finally {
    reads.time.charge(projectId, performance.now() - started);
    release();
  }
}

/** What an API description says of a read that is heavy `when` (a clause, as "When …"). */
export const heavyReadNote = (when: string, statementMs: number): string =>
  `${when}, this is a heavy read: at most ${HEAVY_READS_PER_PROJECT} of a project's at once and a share of the time, past either a 429; past ${statementMs / 1000} s a 503.`;

/**
 * `work` as a heavy read in a transaction of its own whose statements PostgreSQL cancels past
 * `bound.ms` each: past it, a 503 QUERY_TIMEOUT saying that `bound.what` took too long (a project
 * of tens of millions of rows is answered, not given a connection for minutes).
 */
export const boundedHeavyRead = <T>(
  ctx: { database: Database; heavyReads: HeavyReads },
  projectId: string,
  bound: { ms: number; what: string },
  work: (db: Db) => Promise<T>,
): Promise<T> =>
  asHeavyRead(ctx.heavyReads, projectId, () =>
    answerTimeout(
      () => withStatementTimeout(ctx.database, bound.ms, work),
      () => new ApiError(503, 'QUERY_TIMEOUT', `${bound.what} took longer than ${bound.ms / 1000} s`),
    ),
  );

/**
 * boundedHeavyRead when `heavy`, else `work` at once on the pool: for a read whose cost was looked
 * at first (a bounded count of what it would walk), cheap below its threshold.
 */
export const boundedHeavyReadWhen = <T>(
  heavy: boolean,
  ctx: { database: Database; heavyReads: HeavyReads },
  projectId: string,
  bound: { ms: number; what: string },
  work: (db: Db) => Promise<T>,
): Promise<T> => (heavy ? boundedHeavyRead(ctx, projectId, bound, work) : work(ctx.database.db));
