import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import { type Role, membershipRole } from './auth.ts';
import { ApiError, notFound } from './errors.ts';

/**
 * The one place where a member's role is enforced (decisions.md § 2). Every dashboard route
 * reached with a session cookie passes this hook after its authentication hook:
 *
 * - reads (GET/HEAD) need MEMBER;
 * - MEMBER also works with contacts (with imports and bulk jobs), templates, segments, campaigns,
 *   workflows, tracked events and image uploads, and may remove themselves from a project;
 * - every other write (the project itself, its keys, members and invitations, domains,
 *   suppressions, billing, reset and delete) needs ADMIN; OWNER has every ADMIN right.
 *
 * An API key acts as ADMIN, so key-authenticated requests pass. Routes under
 * `/users/@me/projects/:id` and `/projects/:id` take the session cookie only (requireUser) and get
 * their project and role here: a user who is not a member gets 404, so a project's existence does
 * not leak.
 */

const RANK: Record<Role, number> = { MEMBER: 0, ADMIN: 1, OWNER: 2 };

const MEMBER_WRITES: RegExp[] = [
  /^\/contacts(\/|$)/,
  /^\/templates(\/|$)/,
  /^\/segments(\/|$)/,
  /^\/campaigns(\/|$)/,
  /^\/workflows(\/|$)/,
  /^\/events\/track$/,
  /^\/uploads\/(image|\*)$/, // upload, and DELETE /uploads/* (GET /uploads/* is public, GET /uploads a read)
  /^\/projects\/:id\/members\/:userId$/, // DELETE only reaches here for self-removal; the service checks whose
];

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The least role that may call `method url` (the route pattern, e.g. `/campaigns/:id/send`). */
export function requiredRole(method: string, url: string): Role {
  if (READ_METHODS.has(method)) return 'MEMBER';
  if (MEMBER_WRITES.some((re) => re.test(url))) {
    if (url === '/projects/:id/members/:userId' && method !== 'DELETE') return 'ADMIN';
    return 'MEMBER';
  }
  return 'ADMIN';
}

const PROJECT_ROUTE = /^\/(users\/@me\/projects|projects)\/:id(\/|$)/;

async function resolveProjectRoute(ctx: AppContext, req: FastifyRequest): Promise<void> {
  const id = (req.params as { id?: unknown } | undefined)?.id;
  if (typeof id !== 'string' || !req.userId) return;
  const role = id.length <= 100 ? await membershipRole(ctx.database.db, id, req.userId) : null;
  if (!role) throw notFound('project', id);
  req.auth = { projectId: id, role, userId: req.userId, keyType: null };
}

export function registerRoleGuard(app: FastifyInstance, ctx: AppContext): void {
  app.addHook('preHandler', async (req) => {
    const url = req.routeOptions.url;
    if (!url) return;
    if (PROJECT_ROUTE.test(url)) {
      if (!req.auth) await resolveProjectRoute(ctx, req);
      else if (req.auth.projectId !== (req.params as { id?: unknown }).id) throw notFound('project', String((req.params as { id?: unknown }).id));
    }
    const auth = req.auth;
    if (!auth || auth.keyType !== null) return;
    const needed = requiredRole(req.method, url);
    if (RANK[auth.role] < RANK[needed]) {
      throw new ApiError(403, 'FORBIDDEN', `This action needs the ${needed} role; you are ${auth.role}`, {
        details: { role: auth.role, required: needed },
      });
    }
  });
}
