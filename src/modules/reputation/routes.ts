import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { projectIdParams } from '../projects/schemas.ts';
import { securityReport } from './service.ts';

/** The project's sending reputation, for the dashboard (session cookie; any member). */
export function reputationRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const handler = async (req: FastifyRequest) => securityReport(ctx, userOf(req), parse(projectIdParams, req.params).id);

  app.get('/users/@me/projects/:id/security', { onRequest }, handler);
  app.get('/projects/:id/security', { onRequest }, handler);
}
