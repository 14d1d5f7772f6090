import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { createDomainBody, domainIdParams, projectIdParams } from './schemas.ts';
import { addDomain, deleteDomain, listDomains, verifyDomainNow } from './service.ts';

export function domainRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);

  app.post('/domains', { onRequest }, async (req, reply) => {
    const { domain } = parse(createDomainBody, req.body ?? {});
    return reply.status(201).send(await addDomain(ctx, projectOf(req), domain));
  });

  app.get('/domains/project/:projectId', { onRequest }, async (req) => {
    const { projectId } = parse(projectIdParams, req.params);
    return listDomains(ctx, projectOf(req), projectId);
  });

  app.get('/domains/:id/verify', { onRequest }, async (req) => {
    const { id } = parse(domainIdParams, req.params);
    return verifyDomainNow(ctx, projectOf(req), id);
  });

  app.delete('/domains/:id', { onRequest }, async (req, reply) => {
    const { id } = parse(domainIdParams, req.params);
    await deleteDomain(ctx, projectOf(req), id);
    return reply.status(204).send();
  });
}
