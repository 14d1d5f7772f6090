import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { getUser, toUserRecord } from '../auth/service.ts';

export function userRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/users/@me', { onRequest: requireUser(ctx) }, async (req) => toUserRecord(await getUser(ctx, userOf(req))));
}
