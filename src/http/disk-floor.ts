import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import { ApiError } from './errors.ts';
import { leakyBuckets } from './leaky-buckets.ts';
import { refusedWhenDiskFull, routeDocOf } from './openapi.ts';

export const diskFull = () =>
  new ApiError(
    507,
    'INSUFFICIENT_STORAGE',
    "The server's database disk is nearly full: writes that add data are paused until its operator frees space (DATABASE_MIN_FREE_MB). Reads and deletes still work",
  );

/**
 * What a project wrote lately, per process: the bodies of its writes that add data, draining at
 * RECENT_WRITES_DRAIN_BYTES_PER_MINUTE. A project past HEAVY_WRITER_BYTES of them is one that wrote
 * the most lately: refused while the disk is 'filling' (below twice its floor). One project can add
 * about 1 GB a minute (10 GB with attachments) and reach the floor in minutes, before anyone can
 * act; the others, writing a few KB a request, go on until the floor itself.
 */
export const RECENT_WRITES_DRAIN_BYTES_PER_MINUTE = 1024 * 1024;
export const HEAVY_WRITER_BYTES = 10 * 1024 * 1024;
/** Writers logged in one 'filling' spell at most (one line each). */
const MAX_LOGGED_WRITERS = 1_000;

const inMb = (bytes: number) => Math.ceil(bytes / (1024 * 1024));

export const heavyWriter = (wrote: number, retryAfter: number) =>
  new ApiError(
    507,
    'INSUFFICIENT_STORAGE',
    `The server's database disk is filling up, and this project wrote about ${inMb(wrote)} MB lately, more than the ${inMb(HEAVY_WRITER_BYTES)} MB a project may while it fills: its writes that add data are paused until the disk has room again or its recent writes drain (${inMb(RECENT_WRITES_DRAIN_BYTES_PER_MINUTE)} MB a minute). Reads and deletes still work`,
    { details: { recentWritesMb: inMb(wrote), limitMb: inMb(HEAVY_WRITER_BYTES), retryAfter } },
  );

/** Whose writes a request's are: its project's, else its user's or its address's (sign-up). */
const writerOf = (req: FastifyRequest): string => req.auth?.projectId ?? (req.userId ? `user:${req.userId}` : `ip:${req.ip}`);

/**
 * The database disk's floor (db/disk-room.ts), for every described POST, PUT and PATCH but those
 * marked `answeredWhenDiskFull`: below the floor each is refused; below twice the floor, those of a
 * project that wrote more than HEAVY_WRITER_BYTES lately. Nothing of a refused request is written.
 */
export function registerDiskFloor(app: FastifyInstance, ctx: AppContext): void {
  const recentWrites = leakyBuckets(RECENT_WRITES_DRAIN_BYTES_PER_MINUTE / 60_000);
  const logged = new Set<string>();
  app.addHook('preHandler', async (req) => {
    if (!refusedWhenDiskFull(req.method, routeDocOf(req.routeOptions.schema))) return;
    const level = ctx.diskRoom.level();
    if (level === 'low') throw diskFull();
    const writer = writerOf(req);
    if (level === 'ok') logged.clear();
    else {
      const wait = recentWrites.secondsAbove(writer, HEAVY_WRITER_BYTES);
      if (wait > 0) {
        const wrote = recentWrites.level(writer);
        if (logged.size < MAX_LOGGED_WRITERS && !logged.has(writer)) {
          logged.add(writer);
          ctx.log.warn({ writer, recentWritesMb: inMb(wrote) }, "the database's disk is filling: this writer's writes are refused (507)");
        }
        throw heavyWriter(wrote, wait);
      }
    }
    recentWrites.add(writer, req.bodyBytes ?? (Number(req.headers['content-length']) || 0));
  });
}
