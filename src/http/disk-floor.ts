import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.ts';
import { ApiError } from './errors.ts';
import { refusedWhenDiskFull, routeDocOf } from './openapi.ts';

export const diskFull = () =>
  new ApiError(
    507,
    'INSUFFICIENT_STORAGE',
    "The server's database disk is nearly full: writes that add data are paused until its operator frees space (DATABASE_MIN_FREE_MB). Reads and deletes still work",
  );

/**
 * The database disk's floor (db/disk-room.ts), for every described POST, PUT and PATCH but those
 * marked `answeredWhenDiskFull`. Nothing of a refused request is written.
 */
export function registerDiskFloor(app: FastifyInstance, ctx: AppContext): void {
  app.addHook('preHandler', async (req) => {
    if (refusedWhenDiskFull(req.method, routeDocOf(req.routeOptions.schema)) && !ctx.diskRoom.hasRoom()) throw diskFull();
  });
}
