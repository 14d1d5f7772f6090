import argon2 from 'argon2';
import { ApiError } from '../../http/errors.ts';

/**
 * Password hashing: argon2id with explicit parameters, and at most a few hashes at once per process.
 *
 * argon2's defaults (64 MiB, t=3, p=4) cost ~180 ms and 64 MiB each; with nothing bounding how many
 * run or wait, a burst of logins took every libuv thread and hundreds of MB. These are one of
 * OWASP's equivalent recommended argon2id settings (m=7 MiB, t=5, p=1): ~15 ms and 7 MiB a hash.
 * Its m=19 MiB, t=2 setting costs the same but left its 19 MiB block in glibc's arena after a
 * hash: an idle process stayed 20 MB larger after its first login. A hash stores its parameters,
 * so older hashes keep verifying (at their own cost) and are replaced at the next login.
 */
export const HASH_OPTIONS = { type: argon2.argon2id, memoryCost: 7 * 1024, timeCost: 5, parallelism: 1 } as const;

/** Hashes running at once: half of libuv's 4 threads, so file, DNS and zlib work still gets through. */
const MAX_RUNNING = 2;
/** Hashes waiting for a slot; past this the request is refused (at ~30 ms a hash, about 0.5 s of work). */
const MAX_WAITING = 32;
const BUSY_RETRY_AFTER_SECONDS = 1;

type Slots = { run<T>(work: () => Promise<T>): Promise<T> };

/** A semaphore with a bounded FIFO queue: refuses with 429 (and Retry-After) when the queue is full. */
export function hashSlots(maxRunning: number, maxWaiting: number): Slots {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  const acquire = async (): Promise<void> => {
    if (running < maxRunning) {
      running++;
      return;
    }
    if (waiting.length >= maxWaiting) throw hashingBusy();
    // The slot passes straight from the releasing hash to this one: `running` stays the same.
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  return {
    async run(work) {
      await acquire();
      try {
        return await work();
      } finally {
        release();
      }
    },
  };
}

/** The 429 of a full hashing queue: the attempt was not made (routes give back its throttle count). */
class HashingBusy extends ApiError {}

const hashingBusy = () =>
  new HashingBusy(429, 'RATE_LIMIT_EXCEEDED', `The server is busy checking passwords; try again in ${BUSY_RETRY_AFTER_SECONDS} seconds`, {
    details: { retryAfter: BUSY_RETRY_AFTER_SECONDS },
  });

export const isHashingBusy = (err: unknown): boolean => err instanceof HashingBusy;

const slots = hashSlots(MAX_RUNNING, MAX_WAITING);

export function hashPassword(password: string): Promise<string> {
  return slots.run(() => argon2.hash(password, HASH_OPTIONS));
}

/** False for a wrong password and for a digest argon2 cannot read. */
export function verifyPassword(digest: string, password: string): Promise<boolean> {
  return slots.run(() => argon2.verify(digest, password).catch(() => false));
}

/** Whether a stored digest was made with other parameters than HASH_OPTIONS. */
export function isOutdatedHash(digest: string): boolean {
  try {
    return argon2.needsRehash(digest, HASH_OPTIONS);
  } catch {
    return false;
  }
}

/** What verifies for an unknown email, so its answer takes as long as a known one's. */
export const DUMMY_HASH = await argon2.hash('not-a-real-password', HASH_OPTIONS);
