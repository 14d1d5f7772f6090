import { CommitOutcomeUnknown } from './client.ts';
import { isTransientDbError, pgErrorCode } from './pg-error.ts';

/**
 * Group commit for the hottest writes (/v1/track, /v1/send, POST /contacts). A request runs at once, in its own
 * transaction, while fewer than `maxInFlight` transactions of its key (the project) are open;
 * otherwise it waits, and when one ends, the waiting requests go together: one transaction,
 * multi-row statements (`runMany`). Nothing waits on a timer: a quiet project sees no added
 * latency, a busy one gets fewer, larger transactions.
 *
 * Each request is answered only after its rows committed. When a group fails for any reason (one
 * request's bad input, a billing cap, a deadlock), its transaction rolled back everything, and
 * each request runs again alone (`runOne`) to get its own answer: a group's failure never becomes
 * another request's error, and nothing is performed twice. The one exception: the connection broke
 * during COMMIT, so the group may have committed; then each request gets that error. A group that
 * committed may also have left a request out with nothing of it written (LEFT_OUT): it runs alone.
 */

/**
 * Per project: two transactions at once keep both PostgreSQL cores busy (one commits while the
 * next fills; 4 and 8 were slower with a longer tail, bench/README § send), and groups of at most
 * 100 (contacts) keep one statement's input and one transaction's locks small.
 */
export const WRITE_GROUP_LIMITS = { maxInFlight: 2, maxSize: 100 };

/**
 * A request's share of a group (`sizeOf`) by the bytes of custom data it carries: one, and one
 * more per 16 KB. A group is built, sent and read back on the event loop in one piece, so its data
 * is what one synchronous step handles: 100 requests of 250 KB each made a 25 MB statement
 * parameter, built and its answer parsed in single steps (the loop held for 130 ms in a burst of
 * 200). Now a group carries at most about 1.6 MB of data; requests of a few KB still go 100 at once.
 */
export const GROUP_SHARE_BYTES = 16 * 1024;
export const groupShareOfData = (dataBytes: number): number => 1 + Math.floor(dataBytes / GROUP_SHARE_BYTES);

const TRANSIENT_ATTEMPTS = 3;
const SCAN_FACTOR = 4;

/** A result of `runMany` for a request the group committed without (nothing of it written): it runs alone. */
export const LEFT_OUT = Symbol('left out of its group');

export type WriteGroups<I, O> = { submit: (key: string, input: I) => Promise<O> };

type Waiting<I, O> = { input: I; resolve: (o: O) => void; reject: (err: unknown) => void };
type KeyState<I, O> = { inFlight: number; waiting: Waiting<I, O>[] };

export function writeGroups<I, O>(opts: {
  /** Transactions open at once per key. */
  maxInFlight: number;
  /** A group's total size; the first request of a group always joins it. */
  maxSize: number;
  /** A request's share of `maxSize` (1 unless given). */
  sizeOf?: (input: I) => number;
  /** A request sharing a key (a contact) with one already in the group waits for the next group. */
  conflictKeys: (input: I) => string[];
  runOne: (input: I) => Promise<O>;
  /** All inputs in one transaction; results in input order (LEFT_OUT for an input it did not write). */
  runMany: (inputs: I[]) => Promise<(O | typeof LEFT_OUT)[]>;
  /** Told when a group failed and its requests run one by one. */
  onGroupFailed?: (err: unknown, size: number) => void;
}): WriteGroups<I, O> {
  const states = new Map<string, KeyState<I, O>>();

  const takeGroup = (state: KeyState<I, O>): Waiting<I, O>[] => {
    const group: Waiting<I, O>[] = [];
    const seen = new Set<string>();
    const left: Waiting<I, O>[] = [];
    let size = 0;
    // Looking at a bounded number of waiting requests keeps this linear when thousands wait for
    // one contact (each group could take only one of them).
    const scanned = Math.min(state.waiting.length, SCAN_FACTOR * opts.maxSize);
    for (let i = 0; i < scanned && size < opts.maxSize; i++) {
      const w = state.waiting[i];
      const keys = opts.conflictKeys(w.input);
      const itsSize = opts.sizeOf?.(w.input) ?? 1;
      if (group.length === 0 || (size + itsSize <= opts.maxSize && !keys.some((k) => seen.has(k)))) {
        for (const k of keys) seen.add(k);
        size += itsSize;
        group.push(w);
      } else left.push(w);
    }
    state.waiting = left.concat(state.waiting.slice(left.length + group.length));
    return group;
  };

  const runAlone = async (w: Waiting<I, O>): Promise<void> => {
    // Transactions of different shapes (a group, a multi-recipient send, a project's first use of a
    // field) can still deadlock; the victim was rolled back whole, so it runs again.
    for (let attempt = 1; ; attempt++) {
      try {
        return w.resolve(await opts.runOne(w.input));
      } catch (err) {
        if (attempt < TRANSIENT_ATTEMPTS && isTransientDbError(err)) continue;
        return w.reject(err);
      }
    }
  };

  const runGroup = async (group: Waiting<I, O>[]): Promise<void> => {
    if (group.length === 1) return runAlone(group[0]);
    let results: (O | typeof LEFT_OUT)[];
    try {
      results = await opts.runMany(group.map((w) => w.input));
    } catch (err) {
      opts.onGroupFailed?.(err, group.length);
      // Running them again could perform them twice; each gets the error, as a lone request would.
      if (err instanceof CommitOutcomeUnknown) return group.forEach((w) => w.reject(err));
      await Promise.all(group.map(runAlone));
      return;
    }
    const leftOut: Waiting<I, O>[] = [];
    group.forEach((w, i) => {
      const result = results[i];
      if (result === LEFT_OUT) leftOut.push(w);
      else w.resolve(result);
    });
    await Promise.all(leftOut.map(runAlone));
  };

  const start = (key: string, state: KeyState<I, O>, group: Waiting<I, O>[]): void => {
    state.inFlight++;
    void runGroup(group).finally(() => {
      state.inFlight--;
      if (state.waiting.length > 0) start(key, state, takeGroup(state));
      else if (state.inFlight === 0) states.delete(key);
    });
  };

  return {
    submit: (key, input) =>
      new Promise<O>((resolve, reject) => {
        let state = states.get(key);
        if (!state) {
          state = { inFlight: 0, waiting: [] };
          states.set(key, state);
        }
        const waiting = { input, resolve, reject };
        if (state.inFlight < opts.maxInFlight) start(key, state, [waiting]);
        else state.waiting.push(waiting);
      }),
  };
}

/** Logs a failed group by the error's kind only: a database error's detail can quote contact data. */
export function logGroupFailure(ctx: { log: { info: (o: object, msg: string) => void } }, what: string, err: unknown, size: number): void {
  const kind = err instanceof Error ? err.constructor.name : typeof err;
  ctx.log.info({ what, size, kind, code: pgErrorCode(err) }, 'grouped write failed; its requests run one by one');
}
