import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { addMembers, removeMembers } from './members.ts';
import { computeSegment } from './membership.ts';
import {
  addMembersBody,
  parseCreateSegment,
  removeMembersBody,
  segmentContactsQuery,
  segmentIdParams,
  updateSegmentBody,
} from './schemas.ts';
import { createSegment, deleteSegment, getSegment, listSegmentContacts, listSegments, refreshSegment, updateSegment } from './service.ts';
import './usage.ts';

export function segmentRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const db = ctx.database.db;
  const idOf = (params: unknown) => parse(segmentIdParams, params).id;

  app.get('/segments', { onRequest }, async (req) => listSegments(db, projectOf(req).projectId));

  app.post('/segments', { onRequest }, async (req, reply) => {
    const segment = await createSegment(ctx, projectOf(req).projectId, parseCreateSegment(req.body));
    return reply.status(201).send(segment);
  });

  app.get('/segments/:id', { onRequest }, async (req) => getSegment(db, projectOf(req).projectId, idOf(req.params)));

  app.patch('/segments/:id', { onRequest }, async (req) =>
    updateSegment(ctx, projectOf(req).projectId, idOf(req.params), parse(updateSegmentBody, req.body ?? {})),
  );

  app.delete('/segments/:id', { onRequest }, async (req, reply) => {
    await deleteSegment(ctx, projectOf(req).projectId, idOf(req.params));
    return reply.status(204).send();
  });

  app.get('/segments/:id/contacts', { onRequest }, async (req) =>
    listSegmentContacts(ctx, projectOf(req).projectId, idOf(req.params), parse(segmentContactsQuery, req.query)),
  );

  app.post('/segments/:id/members', { onRequest }, async (req) =>
    addMembers(ctx, projectOf(req).projectId, idOf(req.params), parse(addMembersBody, req.body)),
  );

  app.delete('/segments/:id/members', { onRequest }, async (req) =>
    removeMembers(ctx, projectOf(req).projectId, idOf(req.params), parse(removeMembersBody, req.body).emails),
  );

  app.post('/segments/:id/compute', { onRequest }, async (req) => computeSegment(ctx, projectOf(req).projectId, idOf(req.params)));

  app.post('/segments/:id/refresh', { onRequest }, async (req) => refreshSegment(ctx, projectOf(req).projectId, idOf(req.params)));
}
