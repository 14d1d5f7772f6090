import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { createDomainBody, domainIdParams, domainSchema, projectIdParams } from './schemas.ts';
import { addDomain, deleteDomain, listDomains, verifyDomainNow } from './service.ts';

export function domainRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Domains', 'project');

  app.post(
    '/domains',
    {
      schema: doc({
        operationId: 'domains.create',
        summary: 'Add a sender domain; answers the DNS records to publish',
        body: createDomainBody,
        bodyExample: { domain: 'acme.test' },
        responses: { 201: domainSchema },
        errors: [403, 409, 429],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { domain } = parse(createDomainBody, req.body ?? {});
      return reply.status(201).send(await addDomain(ctx, projectOf(req).projectId, domain));
    },
  );

  app.get(
    '/domains/project/:projectId',
    {
      schema: doc({
        operationId: 'domains.list',
        summary: "A project's domains",
        params: projectIdParams,
        responses: { 200: z.array(domainSchema) },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = parse(projectIdParams, req.params);
      return listDomains(ctx, projectOf(req).projectId, projectId);
    },
  );

  app.get(
    '/domains/:id/verify',
    {
      schema: doc({
        operationId: 'domains.verify',
        summary: 'Check the DNS records now',
        params: domainIdParams,
        responses: { 200: domainSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(domainIdParams, req.params);
      return verifyDomainNow(ctx, projectOf(req).projectId, id);
    },
  );

  app.delete(
    '/domains/:id',
    { schema: doc({ operationId: 'domains.delete', summary: 'Remove a domain', params: domainIdParams, responses: { 204: null }, errors: [404] }), onRequest },
    async (req, reply) => {
      const { id } = parse(domainIdParams, req.params);
      await deleteDomain(ctx, projectOf(req).projectId, id);
      return reply.status(204).send();
    },
  );
}
