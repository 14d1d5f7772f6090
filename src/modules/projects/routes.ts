import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { createProjectBody, projectIdParams, projectSchema, updateProjectBody } from './schemas.ts';
import { createProject, deleteProject, listProjects, regenerateKeys, regenerateWebhookSecret, updateProject } from './service.ts';

export function projectRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const doc = describer('Projects', 'session');

  app.get(
    '/users/@me/projects',
    { schema: doc({ operationId: 'projects.list', summary: "The user's projects", responses: { 200: z.array(projectSchema) } }), onRequest },
    async (req) => listProjects(ctx, userOf(req)),
  );

  app.post(
    '/users/@me/projects',
    {
      schema: doc({
        operationId: 'projects.create',
        summary: 'Create a project (answers its secret key once)',
        body: createProjectBody,
        responses: { 201: projectSchema },
        errors: [403, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const project = await createProject(ctx, userOf(req), parse(createProjectBody, req.body));
      return reply.status(201).send(project);
    },
  );

  app.patch(
    '/users/@me/projects/:id',
    {
      schema: doc({
        operationId: 'projects.update',
        summary: 'Rename or change settings',
        params: projectIdParams,
        body: updateProjectBody,
        responses: { 200: projectSchema },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(projectIdParams, req.params);
      return updateProject(ctx, userOf(req), id, parse(updateProjectBody, req.body));
    },
  );

  app.delete(
    '/users/@me/projects/:id',
    {
      schema: doc({
        operationId: 'projects.delete',
        summary: 'Delete a project and everything in it',
        description:
          'The project is gone at once: its keys are refused, it leaves every project list, its pending sends never go out and its images are removed. Its rows are removed in short batches: for up to 2 s before the answer (most projects whole), the rest by a background job that survives a restart.',
        params: projectIdParams,
        responses: { 204: null },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(projectIdParams, req.params);
      await deleteProject(ctx, userOf(req), id);
      return reply.status(204).send();
    },
  );

  app.post(
    '/users/@me/projects/:id/regenerate-keys',
    {
      schema: doc({
        operationId: 'projects.regenerateKeys',
        answeredWhenDiskFull: true,
        summary: 'New API keys (the old ones stop working)',
        params: projectIdParams,
        responses: { 200: projectSchema },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(projectIdParams, req.params);
      return regenerateKeys(ctx, userOf(req), id);
    },
  );

  app.post(
    '/users/@me/projects/:id/regenerate-webhook-secret',
    {
      schema: doc({
        operationId: 'projects.regenerateWebhookSecret',
        answeredWhenDiskFull: true,
        summary: 'New signing secret for workflow webhooks',
        params: projectIdParams,
        responses: { 200: projectSchema },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req) => {
      const { id } = parse(projectIdParams, req.params);
      return regenerateWebhookSecret(ctx, userOf(req), id);
    },
  );
}
