import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { describe } from '../../http/openapi.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { getUser, toUserRecord } from '../auth/service.ts';

export function userRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    '/users/@me',
    {
      schema: describe({
        operationId: 'users.me',
        summary: 'The signed-in user',
        tag: 'Users',
        access: 'session',
        responses: { 200: z.object({ id: z.string(), email: z.string(), emailVerified: z.boolean(), createdAt: z.string(), updatedAt: z.string() }) },
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => toUserRecord(await getUser(ctx, userOf(req))),
  );
}
