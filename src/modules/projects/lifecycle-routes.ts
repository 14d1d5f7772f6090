import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireUser } from '../../http/auth.ts';
import { describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { resetProject, setupState } from './lifecycle.ts';
import { PROJECT_PURGES_PER_PROCESS, PROJECT_PURGES_PER_PROJECT } from './purge.ts';
import { projectIdParams } from './schemas.ts';

/** Reset and onboarding state. The project and the caller's role come from http/roles.ts. */
export function projectLifecycleRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post(
    '/users/@me/projects/:id/reset',
    {
      schema: describe({
        operationId: 'projects.reset',
        answeredWhenDiskFull: true,
        summary: 'Delete all contacts, emails, events and content, keep the project and its keys',
        description: `Deletes in short batches, table by table, and answers when all are done with the rows deleted per table (those written while it ran included); the project keeps working meanwhile. At most ${PROJECT_PURGES_PER_PROJECT} reset of a project at once (${PROJECT_PURGES_PER_PROCESS} of all projects, per process); another is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s (rows locked by other writes) stops the reset with a 409 whose \`details.deleted\` counts the rows deleted so far; ask again to finish.`,
        tag: 'Projects',
        access: 'session',
        params: projectIdParams,
        responses: { 200: z.object({ success: z.literal(true), deleted: z.record(z.number().int()) }) },
        errors: [403, 404, 409, 429],
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => {
      parse(projectIdParams, req.params);
      return resetProject(ctx, projectOf(req).projectId);
    },
  );

  app.get(
    '/projects/:id/setup-state',
    {
      schema: describe({
        operationId: 'projects.setupState',
        summary: 'Onboarding checklist state',
        tag: 'Projects',
        access: 'session',
        params: projectIdParams,
        responses: {
          200: z.object({
            hasVerifiedDomain: z.boolean(),
            contactCount: z.number().int(),
            hasTemplate: z.boolean(),
            lastCampaignSentAt: z.string().nullable(),
            hasEnabledWorkflow: z.boolean(),
            hasSentEmail: z.boolean(),
            hasSubscription: z.boolean(),
          }),
        },
        errors: [404],
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => {
      parse(projectIdParams, req.params);
      return setupState(ctx, projectOf(req).projectId);
    },
  );
}
