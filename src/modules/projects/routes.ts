import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { createProjectBody, projectIdParams, updateProjectBody } from './schemas.ts';
import { createProject, deleteProject, listProjects, regenerateKeys, updateProject } from './service.ts';

export function projectRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);

  app.get('/users/@me/projects', { onRequest }, async (req) => listProjects(ctx, userOf(req)));

  app.post('/users/@me/projects', { onRequest }, async (req, reply) => {
    const project = await createProject(ctx, userOf(req), parse(createProjectBody, req.body));
    return reply.status(201).send(project);
  });

  app.patch('/users/@me/projects/:id', { onRequest }, async (req) => {
    const { id } = parse(projectIdParams, req.params);
    return updateProject(ctx, userOf(req), id, parse(updateProjectBody, req.body));
  });

  app.delete('/users/@me/projects/:id', { onRequest }, async (req, reply) => {
    const { id } = parse(projectIdParams, req.params);
    await deleteProject(ctx, userOf(req), id);
    return reply.status(204).send();
  });

  app.post('/users/@me/projects/:id/regenerate-keys', { onRequest }, async (req) => {
    const { id } = parse(projectIdParams, req.params);
    return regenerateKeys(ctx, userOf(req), id);
  });
}
