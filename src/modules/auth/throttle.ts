import { sql } from 'drizzle-orm';
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { ApiError } from '../../http/errors.ts';

/**
 * Throttling of the unauthenticated auth routes, per client IP and per account, in PostgreSQL so
 * every API process shares it. A rule counts attempts (or failures) in a window: past `slowAfter`
 * each answer is delayed a little more, at `lockAt` the key is locked for `lockSeconds` and
 * answered 429 with Retry-After. Limits are in README § Security.
 */

export type Rule = { name: string; windowSeconds: number; slowAfter: number; lockAt: number; lockSeconds: number };

const MINUTE = 60;

export const RULES = {
  /** Wrong passwords from one IP, any accounts. */
  loginIp: { name: 'login-ip', windowSeconds: 15 * MINUTE, slowAfter: 20, lockAt: 30, lockSeconds: 15 * MINUTE },
  /** Wrong passwords for one account, from anywhere. */
  loginAccount: { name: 'login-account', windowSeconds: 15 * MINUTE, slowAfter: 5, lockAt: 10, lockSeconds: 5 * MINUTE },
  /** Password-reset requests from one IP. */
  resetRequestIp: { name: 'reset-request-ip', windowSeconds: 15 * MINUTE, slowAfter: 5, lockAt: 10, lockSeconds: 15 * MINUTE },
  /** Failed reset or verification tokens from one IP. */
  tokenIp: { name: 'token-ip', windowSeconds: 15 * MINUTE, slowAfter: 10, lockAt: 30, lockSeconds: 15 * MINUTE },
} as const satisfies Record<string, Rule>;

/** Sign-ups from one IP per hour: SIGNUPS_PER_IP_PER_HOUR (an office behind one address may need more). */
export const signupRule = (perHour: number): Rule => ({
  name: 'signup-ip',
  windowSeconds: 60 * MINUTE,
  slowAfter: Math.ceil(perHour / 2),
  lockAt: perHour,
  lockSeconds: 60 * MINUTE,
});

/** One reset email per address per this many seconds; further requests answer 200 and send nothing. */
export const RESET_EMAIL_INTERVAL_SECONDS = 5 * MINUTE;

/** One verification email per account per this many seconds (the signup's included); further requests answer 200 and send nothing. */
export const VERIFICATION_EMAIL_INTERVAL_SECONDS = 5 * MINUTE;

/** Delay per attempt past `slowAfter`, and its cap. */
const STEP_MS = 250;
const MAX_DELAY_MS = 2000;

export type Throttled = { rule: Rule; key: string };

export const byIp = (rule: Rule, ip: string): Throttled => ({ rule, key: `${rule.name}:${ip}` });
export const byAccount = (rule: Rule, email: string): Throttled => ({ rule, key: `${rule.name}:${email}` });

const tooMany = (retryAfter: number) =>
  new ApiError(429, 'RATE_LIMIT_EXCEEDED', `Too many attempts; try again in ${retryAfter} seconds`, { details: { retryAfter } });

type Counter = { key: string; count: number; age: number };

/**
 * Counts one attempt on each key BEFORE it is made. Refuses (429 with `retryAfter`) while any key is
 * locked, counting nothing; otherwise counts the attempt on every key, locks the key that reaches its
 * `lockAt` (this attempt still goes ahead: it is the last one allowed), and waits the slow-down the
 * earlier counts call for. Reading and counting is one statement holding the rows' locks, so
 * concurrent attempts are counted one after another: of N at once, at most `lockAt` get through.
 *
 * Where only failures count, give the attempt back with `uncount` when it succeeds or never happens.
 */
export async function admit(ctx: AppContext, keys: Throttled[]): Promise<void> {
  // A locked key is refused by a plain read: a flood against it takes no row locks.
  const lockedFor = await secondsLocked(ctx, keys);
  if (lockedFor > 0) throw tooMany(lockedFor);
  const byKey = [...keys].sort((a, b) => (a.key < b.key ? -1 : 1)); // one order of row locks: no deadlocks
  const { retry, before } = await countAttempt(ctx, byKey);
  if (retry !== null) throw tooMany(retry);
  const delay = slowdownMs(keys, before);
  if (delay > 0) await sleep(delay);
  if (randomInt(100) === 0) await forgetOldCounters(ctx);
}

/**
 * How long the most locked of the keys stays locked, in seconds (0: none is). Timed by
 * clock_timestamp(), not now(): a lock committed between this statement's start and its snapshot
 * was set from a later now(), and its Retry-After came out a second past the lock's length.
 */
async function secondsLocked(ctx: AppContext, keys: Throttled[]): Promise<number> {
  const { rows } = await ctx.database.db.execute<{ retry: number | null }>(sql`
    SELECT MAX(CEIL(EXTRACT(EPOCH FROM locked_until - clock_timestamp())))::int AS retry
      FROM auth_throttle WHERE key = ANY(${sql.param(keys.map((k) => k.key))}::text[]) AND locked_until > clock_timestamp()`);
  return rows[0]?.retry ?? 0;
}

/**
 * In one statement: locks the keys' rows, and unless one of them is locked (`retry`, seconds), counts
 * one more attempt on each (1 when its window is over), locking the one that reaches `lockAt`.
 * `before`: the counters as they were.
 */
async function countAttempt(ctx: AppContext, keys: Throttled[]): Promise<{ retry: number | null; before: Counter[] }> {
  const list = (pick: (k: Throttled) => string | number) => sql.param(keys.map(pick));
  await ctx.database.db.execute(sql`
    INSERT INTO auth_throttle (key, count, window_start) SELECT key, 0, now() FROM unnest(${list((k) => k.key)}::text[]) AS key
    ON CONFLICT (key) DO NOTHING`);
  // FOR UPDATE waits for concurrent attempts and reads the rows as they left them; the UPDATE then
  // works on those rows (PostgreSQL re-reads a row updated since the statement began). The time
  // of a refusal is read after the wait: now() is when the statement began, maybe before the lock.
  const { rows } = await ctx.database.db.execute<Counter & { retry: number | null }>(sql`
    WITH rules (key, window_s, lock_at, lock_s) AS (
      SELECT * FROM unnest(${list((k) => k.key)}::text[], ${list((k) => k.rule.windowSeconds)}::int[],
                           ${list((k) => k.rule.lockAt)}::int[], ${list((k) => k.rule.lockSeconds)}::int[])
    ), before AS (
      SELECT key, count, window_start, locked_until FROM auth_throttle
       WHERE key IN (SELECT key FROM rules) ORDER BY key FOR UPDATE
    ), refused AS (
      SELECT MAX(CEIL(EXTRACT(EPOCH FROM locked_until - clock_timestamp())))::int AS retry
        FROM before WHERE locked_until > clock_timestamp()
    ), fresh AS (
      SELECT r.*, t.window_start < now() - make_interval(secs => r.window_s) AS window_over
        FROM rules r JOIN before t USING (key)
    ), counted AS (
      UPDATE auth_throttle AS t SET
        count = CASE WHEN f.window_over THEN 1 ELSE t.count + 1 END,
        window_start = CASE WHEN f.window_over THEN now() ELSE t.window_start END,
        locked_until = CASE WHEN (CASE WHEN f.window_over THEN 1 ELSE t.count + 1 END) >= f.lock_at
                            THEN now() + make_interval(secs => f.lock_s) ELSE t.locked_until END
        FROM fresh f
       WHERE t.key = f.key AND (SELECT retry FROM refused) IS NULL
       RETURNING t.key
    )
    SELECT b.key, b.count, EXTRACT(EPOCH FROM now() - b.window_start)::float8 AS age, (SELECT retry FROM refused) AS retry
      FROM before b`);
  return { retry: rows[0]?.retry ?? null, before: rows };
}

/** The delay past `slowAfter` for the counts before this attempt (within their window). */
function slowdownMs(keys: Throttled[], before: Counter[]): number {
  let delay = 0;
  for (const counter of before) {
    const rule = keys.find((k) => k.key === counter.key)!.rule;
    if (counter.age > rule.windowSeconds) continue;
    delay = Math.max(delay, Math.min(MAX_DELAY_MS, (counter.count - rule.slowAfter) * STEP_MS));
  }
  return delay;
}

/**
 * Takes back an attempt `admit` counted on the keys (it succeeded where only failures count, or was
 * never made); a lock it set is lifted when the count falls back under `lockAt`.
 */
export async function uncount(ctx: AppContext, keys: Throttled[]): Promise<void> {
  for (const { rule, key } of keys) {
    await ctx.database.db.execute(sql`
      UPDATE auth_throttle SET
        count = GREATEST(count - 1, 0),
        locked_until = CASE WHEN count - 1 < ${rule.lockAt} THEN NULL ELSE locked_until END
      WHERE key = ${key}`);
  }
}

/** Now and then, forget counters whose window and lock are long over (bounds the table without a cron). */
async function forgetOldCounters(ctx: AppContext): Promise<void> {
  await ctx.database.db.execute(
    sql`DELETE FROM auth_throttle WHERE window_start < now() - interval '1 day' AND (locked_until IS NULL OR locked_until < now())`,
  );
}

/** Forgets the keys' counts (a successful login clears its account's failures, not its IP's). */
export async function clear(ctx: AppContext, keys: Throttled[]): Promise<void> {
  await ctx.database.db.execute(sql`DELETE FROM auth_throttle WHERE key = ANY(${sql.param(keys.map((k) => k.key))}::text[])`);
}

/** True once per address per RESET_EMAIL_INTERVAL_SECONDS: whether this request may send a reset email. */
export async function mayMailReset(ctx: AppContext, email: string, db: Db = ctx.database.db): Promise<boolean> {
  return firstInWindow(ctx, `reset-mail:${email}`, RESET_EMAIL_INTERVAL_SECONDS, db);
}

/** True once per account per VERIFICATION_EMAIL_INTERVAL_SECONDS: whether this request may send a verification email. */
export async function mayMailVerification(ctx: AppContext, userId: string): Promise<boolean> {
  return firstInWindow(ctx, `verify-mail:${userId}`, VERIFICATION_EMAIL_INTERVAL_SECONDS);
}

/** True for the first call with `key` in a window of `seconds` (shared by every API process; `db` may be a transaction). */
export async function firstInWindow(ctx: AppContext, key: string, seconds: number, db: Db = ctx.database.db): Promise<boolean> {
  const windowStart = sql`now() - make_interval(secs => ${seconds})`;
  const { rows } = await db.execute<{ count: number }>(sql`
    INSERT INTO auth_throttle AS t (key, count, window_start) VALUES (${key}, 1, now())
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN t.window_start < ${windowStart} THEN 1 ELSE t.count + 1 END,
      window_start = CASE WHEN t.window_start < ${windowStart} THEN now() ELSE t.window_start END
    RETURNING count`);
  return rows[0].count === 1;
}
