import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import {
  assertRequiredFields,
  createTemplateBody,
  listTemplatesQuery,
  templateIdParams,
  updateTemplateBody,
} from './schemas.ts';
import {
  createTemplate,
  deleteTemplate,
  duplicateTemplate,
  getTemplate,
  listTemplates,
  templateUsage,
  updateTemplate,
} from './service.ts';

export function templateRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);

  app.get('/templates', { onRequest }, async (req) =>
    listTemplates(ctx, projectOf(req).projectId, parse(listTemplatesQuery, req.query)),
  );

  app.post('/templates', { onRequest }, async (req, reply) => {
    assertRequiredFields(req.body);
    const template = await createTemplate(ctx, projectOf(req).projectId, parse(createTemplateBody, req.body));
    return reply.status(201).send(template);
  });

  app.get('/templates/:id', { onRequest }, async (req) => {
    const { id } = parse(templateIdParams, req.params);
    return getTemplate(ctx.database.db, projectOf(req).projectId, id);
  });

  app.patch('/templates/:id', { onRequest }, async (req) => {
    const { id } = parse(templateIdParams, req.params);
    return updateTemplate(ctx, projectOf(req).projectId, id, parse(updateTemplateBody, req.body ?? {}));
  });

  app.delete('/templates/:id', { onRequest }, async (req, reply) => {
    const { id } = parse(templateIdParams, req.params);
    await deleteTemplate(ctx, projectOf(req).projectId, id);
    return reply.status(204).send();
  });

  app.post('/templates/:id/duplicate', { onRequest }, async (req, reply) => {
    const { id } = parse(templateIdParams, req.params);
    return reply.status(201).send(await duplicateTemplate(ctx, projectOf(req).projectId, id));
  });

  app.get('/templates/:id/usage', { onRequest }, async (req) => {
    const { id } = parse(templateIdParams, req.params);
    return templateUsage(ctx, projectOf(req).projectId, id);
  });
}
