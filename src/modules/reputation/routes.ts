import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { projectIdParams } from '../projects/schemas.ts';
import { securityReport } from './service.ts';

const level = z.enum(['ok', 'warning', 'critical']);
const rateReport = z.object({ last7Days: z.number(), allTime: z.number(), level });
const limits = z.object({ warning: z.number(), critical: z.number() });
const windows = z.object({ last7Days: limits, allTime: limits });
const pair = z.object({ last7Days: z.number(), allTime: z.number() });

const securityReportSchema = z.object({
  status: level,
  sentLast7Days: z.number().int(),
  sentAllTime: z.number().int(),
  bounceRate: rateReport.describe('Percent of sent mail that bounced'),
  complaintRate: rateReport.describe('Percent of sent mail reported as spam'),
  disabled: z.boolean(),
  disabledReason: z.string().nullable(),
  recentSuspensions: z.array(
    z.object({
      id: z.string(),
      reason: z.string(),
      bounceRate: pair,
      complaintRate: pair,
      sentLast7Days: z.number().int(),
      sentAllTime: z.number().int(),
      createdAt: z.string(),
    }),
  ),
  thresholds: z.object({ bounce: windows, complaint: windows }).describe('Warning and critical levels, in percent'),
  minimumVolume: z.number().int(),
});

const doc = (operationId: string, summary: string) =>
  describe({ operationId, summary, tag: 'Projects', access: 'session', params: projectIdParams, responses: { 200: securityReportSchema }, errors: [404] });

/** The project's sending reputation, for the dashboard (session cookie; any member). */
export function reputationRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const handler = async (req: FastifyRequest) => securityReport(ctx, userOf(req), parse(projectIdParams, req.params).id);

  app.get(
    '/users/@me/projects/:id/security',
    { schema: doc('projects.security', 'Sending reputation: bounce and complaint rates, suspensions'), onRequest },
    handler,
  );
  app.get(
    '/projects/:id/security',
    { schema: doc('projects.securityAlias', 'Sending reputation (same as /users/@me/projects/:id/security)'), onRequest },
    handler,
  );
}
