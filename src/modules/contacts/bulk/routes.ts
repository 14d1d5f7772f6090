import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../../context.ts';
import { projectOf, requireProject } from '../../../http/auth.ts';
import { parse } from '../../../http/validate.ts';
import { BULK_TYPES, bulkBody, bulkJobParams } from './schemas.ts';
import { createBulkJob, getBulkJob } from './service.ts';

export function bulkRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);

  for (const type of BULK_TYPES) {
    app.post(`/contacts/${type}`, { onRequest }, async (req, reply) => {
      const { contactIds } = parse(bulkBody, req.body);
      return reply.status(202).send(await createBulkJob(ctx, projectOf(req).projectId, type, contactIds));
    });
  }

  app.get('/contacts/bulk/:jobId', { onRequest }, async (req) =>
    getBulkJob(ctx.database.db, projectOf(req).projectId, parse(bulkJobParams, req.params).jobId),
  );
}
