import { sql } from 'drizzle-orm';
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppContext } from '../../context.ts';
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

/** Delay per attempt past `slowAfter`, and its cap. */
const STEP_MS = 250;
const MAX_DELAY_MS = 2000;

export type Throttled = { rule: Rule; key: string };

export const byIp = (rule: Rule, ip: string): Throttled => ({ rule, key: `${rule.name}:${ip}` });
export const byAccount = (rule: Rule, email: string): Throttled => ({ rule, key: `${rule.name}:${email}` });

const tooMany = (retryAfter: number) =>
  new ApiError(429, 'RATE_LIMIT_EXCEEDED', `Too many attempts; try again in ${retryAfter} seconds`, { details: { retryAfter } });

/**
 * Refuses (429 with `retryAfter`) while any of the keys is locked; otherwise waits the slow-down
 * their current counts call for. Call before the attempt.
 */
export async function guard(ctx: AppContext, keys: Throttled[]): Promise<void> {
  const { rows } = await ctx.database.db.execute<{ key: string; count: number; retry: number | null; age: number }>(sql`
    SELECT key, count, CEIL(EXTRACT(EPOCH FROM locked_until - now()))::int AS retry, EXTRACT(EPOCH FROM now() - window_start)::float8 AS age
      FROM auth_throttle WHERE key = ANY(${sql.param(keys.map((k) => k.key))}::text[])`);
  let delay = 0;
  for (const row of rows) {
    if (row.retry !== null && row.retry > 0) throw tooMany(row.retry);
    const rule = keys.find((k) => k.key === row.key)!.rule;
    if (row.age > rule.windowSeconds) continue;
    delay = Math.max(delay, Math.min(MAX_DELAY_MS, (row.count - rule.slowAfter) * STEP_MS));
  }
  if (delay > 0) await sleep(delay);
}

/** Counts one attempt (or failure) on each key; the one that reaches its lock threshold is locked. */
export async function count(ctx: AppContext, keys: Throttled[]): Promise<void> {
  for (const { rule, key } of keys) {
    const windowStart = sql`now() - make_interval(secs => ${rule.windowSeconds})`;
    await ctx.database.db.execute(sql`
      INSERT INTO auth_throttle AS t (key, count, window_start) VALUES (${key}, 1, now())
      ON CONFLICT (key) DO UPDATE SET
        count = CASE WHEN t.window_start < ${windowStart} THEN 1 ELSE t.count + 1 END,
        window_start = CASE WHEN t.window_start < ${windowStart} THEN now() ELSE t.window_start END,
        locked_until = CASE WHEN t.window_start >= ${windowStart} AND t.count + 1 >= ${rule.lockAt}
                            THEN now() + make_interval(secs => ${rule.lockSeconds}) ELSE t.locked_until END`);
  }
  // Now and then, forget counters whose window and lock are long over (bounds the table without a cron).
  if (randomInt(100) === 0) {
    await ctx.database.db.execute(
      sql`DELETE FROM auth_throttle WHERE window_start < now() - interval '1 day' AND (locked_until IS NULL OR locked_until < now())`,
    );
  }
}

/** Forgets the keys' counts (a successful login clears its account's failures, not its IP's). */
export async function clear(ctx: AppContext, keys: Throttled[]): Promise<void> {
  await ctx.database.db.execute(sql`DELETE FROM auth_throttle WHERE key = ANY(${sql.param(keys.map((k) => k.key))}::text[])`);
}

/** True once per address per RESET_EMAIL_INTERVAL_SECONDS: whether this request may send a reset email. */
export async function mayMailReset(ctx: AppContext, email: string): Promise<boolean> {
  return firstInWindow(ctx, `reset-mail:${email}`, RESET_EMAIL_INTERVAL_SECONDS);
}

/** True for the first call with `key` in a window of `seconds` (shared by every API process). */
export async function firstInWindow(ctx: AppContext, key: string, seconds: number): Promise<boolean> {
  const windowStart = sql`now() - make_interval(secs => ${seconds})`;
  const { rows } = await ctx.database.db.execute<{ count: number }>(sql`
    INSERT INTO auth_throttle AS t (key, count, window_start) VALUES (${key}, 1, now())
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN t.window_start < ${windowStart} THEN 1 ELSE t.count + 1 END,
      window_start = CASE WHEN t.window_start < ${windowStart} THEN now() ELSE t.window_start END
    RETURNING count`);
  return rows[0].count === 1;
}
