import { heavyNumberedList } from '../../db/page-budget.ts';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { describe, pageListOf, simpleOrErrorSchema } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { templateUsersSchema } from '../usage/schemas.ts';
import { PREVIEWS_PER_PROCESS, PREVIEWS_PER_PROJECT, previewTemplate, previewTemplateBody } from './preview.ts';
import {
  assertRequiredFields,
  createTemplateBody,
  listTemplatesQuery,
  previewSchema,
  templateIdParams,
  templateSchema,
  updateTemplateBody,
} from './schemas.ts';
import { createTemplate, deleteTemplate, duplicateTemplate, getTemplate, listTemplates, templateUsage, updateTemplate } from './service.ts';

export function templateRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = (d: Omit<Parameters<typeof describe>[0], 'tag' | 'access'>) => describe({ tag: 'Templates', access: 'project', ...d });

  app.get(
    '/templates',
    {
      schema: doc({
        operationId: 'templates.list',
        summary: 'List templates',
        description: heavyNumberedList('templates'),
        query: listTemplatesQuery,
        responses: { 200: pageListOf(templateSchema) },
        errors: [503],
      }),
      onRequest,
    },
    async (req) => listTemplates(ctx, projectOf(req).projectId, parse(listTemplatesQuery, req.query)),
  );

  app.post(
    '/templates',
    {
      schema: doc({
        operationId: 'templates.create',
        summary: 'Create a template',
        body: createTemplateBody,
        bodyExample: {
          name: 'Welcome',
          subject: 'Welcome, {{firstName ?? "friend"}}',
          body: '<p>Hi {{firstName}}</p>',
          from: 'hello@acme.test',
          type: 'TRANSACTIONAL',
        },
        responses: { 201: templateSchema, 400: { schema: simpleOrErrorSchema, description: 'A required field is missing: the simple body `{ error }`' } },
        errors: [402, 403],
      }),
      onRequest,
    },
    async (req, reply) => {
      assertRequiredFields(req.body);
      const template = await createTemplate(ctx, projectOf(req).projectId, parse(createTemplateBody, req.body));
      return reply.status(201).send(template);
    },
  );

  app.post(
    '/templates/preview',
    {
      schema: doc({
        operationId: 'templates.preview',
        answeredWhenDiskFull: true,
        summary: 'Render a template with sample data',
        description: `At most ${PREVIEWS_PER_PROJECT} previews of a project render at once (${PREVIEWS_PER_PROCESS} of all projects, per process); another is a 429 at once, with \`details.retryAfter\` and Retry-After.`,
        body: previewTemplateBody,
        responses: { 200: previewSchema },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => previewTemplate(ctx, projectOf(req).projectId, parse(previewTemplateBody, req.body)),
  );

  app.get(
    '/templates/:id',
    {
      schema: doc({ operationId: 'templates.get', summary: 'Get a template', params: templateIdParams, responses: { 200: templateSchema }, errors: [404] }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(templateIdParams, req.params);
      return getTemplate(ctx.database.db, projectOf(req).projectId, id);
    },
  );

  app.patch(
    '/templates/:id',
    {
      schema: doc({
        operationId: 'templates.update',
        summary: 'Update a template',
        params: templateIdParams,
        body: updateTemplateBody,
        responses: { 200: templateSchema },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(templateIdParams, req.params);
      return updateTemplate(ctx, projectOf(req).projectId, id, parse(updateTemplateBody, req.body ?? {}));
    },
  );

  app.delete(
    '/templates/:id',
    {
      schema: doc({
        operationId: 'templates.delete',
        summary: 'Delete a template (409 while campaigns or workflows use it)',
        params: templateIdParams,
        responses: { 204: null },
        errors: [404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(templateIdParams, req.params);
      await deleteTemplate(ctx, projectOf(req).projectId, id);
      return reply.status(204).send();
    },
  );

  app.post(
    '/templates/:id/duplicate',
    {
      schema: doc({
        operationId: 'templates.duplicate',
        summary: 'Copy a template',
        params: templateIdParams,
        responses: { 201: templateSchema },
        errors: [402, 404],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(templateIdParams, req.params);
      return reply.status(201).send(await duplicateTemplate(ctx, projectOf(req).projectId, id));
    },
  );

  app.get(
    '/templates/:id/usage',
    {
      schema: doc({
        operationId: 'templates.usage',
        summary: 'Campaigns and workflows that use a template',
        params: templateIdParams,
        responses: { 200: templateUsersSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(templateIdParams, req.params);
      return templateUsage(ctx, projectOf(req).projectId, id);
    },
  );
}
