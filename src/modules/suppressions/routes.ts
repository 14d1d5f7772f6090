import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { limitParam } from '../../http/pagination.ts';
import { cursorList, describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { heavyReadNote } from '../../http/heavy-reads.ts';
import { SUPPRESSIONS_LISTED_AT_ONCE, SUPPRESSIONS_READ_STATEMENT_MS, deleteSuppression, getSuppression, listSuppressions } from './service.ts';

const listQuery = z.object({
  limit: limitParam,
  cursor: z.string().max(1000).optional(),
  search: z.string().max(254).optional(),
  reason: z.enum(['bounce', 'complaint', 'manual']).optional(),
});

const suppressionSchema = z.object({
  email: z.string(),
  reason: z.enum(['bounce', 'complaint', 'manual']),
  emailId: z.string().nullable(),
  createdAt: z.string(),
});

const emailParams = z.object({ email: z.string().trim().min(1).max(254) });

export function suppressionRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Suppressions', 'project');

  app.get(
    '/suppressions',
    {
      schema: doc({
        operationId: 'suppressions.list',
        summary: 'Suppressed addresses (bounces, complaints, manual)',
        description: `Cursor-paginated, newest first; \`search\` matches part of the address, \`reason\` filters. ${heavyReadNote(
          `With a search (which reads and counts every suppression it matches), or a reason so rare that its page walks more than ${SUPPRESSIONS_LISTED_AT_ONCE.toLocaleString('en-US')} suppressions`,
          SUPPRESSIONS_READ_STATEMENT_MS,
        )}`,
        query: listQuery,
        responses: { 200: cursorList(suppressionSchema) },
        errors: [400, 503],
      }),
      onRequest,
    },
    async (req) => listSuppressions(ctx, projectOf(req).projectId, parse(listQuery, req.query)),
  );

  app.get(
    '/suppressions/:email',
    {
      schema: doc({
        operationId: 'suppressions.get',
        summary: 'Whether an address is suppressed, why and since when',
        description: 'The address is compared lower-case. 404 SUPPRESSION_NOT_FOUND when the project does not suppress it.',
        params: emailParams,
        responses: { 200: suppressionSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => getSuppression(ctx, projectOf(req).projectId, parse(emailParams, req.params).email),
  );

  app.delete(
    '/suppressions/:email',
    {
      schema: doc({
        operationId: 'suppressions.delete',
        summary: 'Allow sending to an address again',
        params: emailParams,
        responses: { 204: null },
        errors: [404],
      }),
      onRequest,
    },
    async (req, reply) => {
      await deleteSuppression(ctx, projectOf(req).projectId, parse(emailParams, req.params).email);
      return reply.status(204).send();
    },
  );
}
