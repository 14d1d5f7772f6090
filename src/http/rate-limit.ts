import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import { ApiError } from './errors.ts';

type IncrResult = { current: number; ttl: number };
type IncrCallback = (err: Error | null, result?: IncrResult) => void;

/**
 * Sliding-window counter: the current fixed window's count plus the previous window's count
 * weighted by how much of it still overlaps the last `timeWindow` ms. Accurate to within a
 * few percent of a true sliding log, with two numbers per key.
 */
function slidingCount(now: number, timeWindow: number, start: number, prev: number, curr: number): IncrResult {
  const overlap = 1 - (now - start) / timeWindow;
  return { current: Math.floor(prev * overlap) + curr, ttl: start + timeWindow - now };
}

/**
 * The counters of one process (no REDIS_URL). A key whose last request is two windows old counts
 * as a new key, so once a window such keys are dropped: the map holds the projects and users of
 * the last two minutes, not every one the process ever served.
 */
export class MemorySlidingStore {
  private readonly windows = new Map<string, { start: number; prev: number; curr: number }>();
  private sweptAt = 0;

  /** Keys held (for tests). */
  get size(): number {
    return this.windows.size;
  }

  incr(key: string, cb: IncrCallback, timeWindow: number): void {
    const now = Date.now();
    const start = now - (now % timeWindow);
    if (this.sweptAt < start) {
      this.sweptAt = start;
      for (const [k, w] of this.windows) if (w.start < start - timeWindow) this.windows.delete(k);
    }
    let w = this.windows.get(key);
    if (!w || w.start < start - timeWindow) w = { start, prev: 0, curr: 0 };
    else if (w.start < start) w = { start, prev: w.curr, curr: 0 };
    w.curr += 1;
    this.windows.set(key, w);
    cb(null, slidingCount(now, timeWindow, start, w.prev, w.curr));
  }

  child(): MemorySlidingStore {
    return this;
  }
}

function redisSlidingStore(redis: Redis) {
  return class RedisSlidingStore {
    incr(key: string, cb: IncrCallback, timeWindow: number): void {
      const now = Date.now();
      const start = now - (now % timeWindow);
      const currKey = `herald:rl:${key}:${start}`;
      const prevKey = `herald:rl:${key}:${start - timeWindow}`;
      redis
        .multi()
        .incr(currKey)
        .pexpire(currKey, timeWindow * 2)
        .get(prevKey)
        .exec()
        .then((res) => {
          const curr = Number(res?.[0]?.[1] ?? 0);
          const prev = Number(res?.[2]?.[1] ?? 0);
          cb(null, slidingCount(now, timeWindow, start, prev, curr));
        })
        .catch((err: Error) => cb(err));
    }

    child() {
      return this;
    }
  };
}

/**
 * Per-project request limit over a sliding minute, shared by all API-key requests; each signed-in
 * user has the same budget for cookie requests.
 * Public-key traffic (/v1/track from browsers) has its own budget so it cannot starve the secret key.
 */
export async function registerRateLimit(app: FastifyInstance, config: Config): Promise<void> {
  // Loaded only when REDIS_URL is set: a single-process install never holds the client in memory.
  const redis = config.redisUrl ? new (await import('ioredis')).Redis(config.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: false }) : null;
  if (redis) app.addHook('onClose', async () => void redis.disconnect());
  await app.register(rateLimit, {
    global: true,
    hook: 'preHandler',
    max: config.apiRateLimitPerMinute,
    timeWindow: 60_000,
    enableDraftSpec: true,
    store: redis ? redisSlidingStore(redis) : (MemorySlidingStore as never),
    skipOnError: true,
    // API keys count per project; session cookies per user (every cookie route, with or without a project).
    allowList: (req) => !req.auth && !req.userId,
    keyGenerator: (req) =>
      req.userId && !req.auth?.keyType ? `user:${req.userId}` : `${req.auth?.projectId}:${req.auth?.keyType === 'public' ? 'public' : 'private'}`,
    errorResponseBuilder: (_req, context) =>
      new ApiError(429, 'RATE_LIMIT_EXCEEDED', `Rate limit of ${context.max} requests per minute exceeded`, {
        details: { retryAfter: Math.max(1, Math.ceil(context.ttl / 1000)), limit: context.max },
      }),
  });
}
