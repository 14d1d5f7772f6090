import { and, eq } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/client.ts';
import { ApiError } from './errors.ts';
import { SESSION_COOKIE, sessionUserId } from './sessions.ts';

import { type Role, memberships } from '../db/schema/users.ts';

export type { Role };

export type ProjectAuth = {
  projectId: string;
  /** The caller's role; an API key acts with ADMIN rights. */
  role: Role;
  userId: string | null;
  keyType: 'secret' | 'public' | null;
};

declare module 'fastify' {
  interface FastifyRequest {
    auth: ProjectAuth | null;
    userId: string | null;
  }
}

type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

const invalidKey = (message: string) => new ApiError(401, 'INVALID_API_KEY', message);
const unauthorized = () => new ApiError(401, 'UNAUTHORIZED', 'Not signed in or the session has expired');
const sessionNeeded = () =>
  new ApiError(401, 'UNAUTHORIZED', 'This endpoint needs a dashboard session (the cookie POST /auth/login sets); API keys are not accepted here');

function bearer(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : '';
}

async function projectFromKey(ctx: AppContext, key: string, expected: 'secret' | 'public'): Promise<ProjectAuth> {
  const owner = key ? await ctx.keys.resolve(key) : null;
  if (!owner) throw invalidKey('Invalid API key');
  if (owner.keyType !== expected) {
    throw invalidKey(
      expected === 'secret'
        ? 'This endpoint requires a secret key (sk_…); public keys are only accepted on /v1/track'
        : 'This endpoint requires a public key (pk_…); do not expose secret keys to browsers',
    );
  }
  if (owner.disabled) {
    throw new ApiError(403, 'PROJECT_DISABLED', 'This project is disabled', {
      details: { reason: owner.disabledReason },
    });
  }
  return { projectId: owner.projectId, role: 'ADMIN', userId: null, keyType: owner.keyType };
}

/** API-key routes: a key of the given type in `Authorization: Bearer`. */
export function requireApiKey(ctx: AppContext, type: 'secret' | 'public'): Hook {
  return async (req) => {
    const key = bearer(req);
    if (key === null) throw invalidKey('Missing API key: send Authorization: Bearer <key>');
    req.auth = await projectFromKey(ctx, key, type);
  };
}

/**
 * Cookie routes: a valid session. An API key is never accepted here: these routes manage accounts,
 * members and keys, and a leaked key must not reach past its project's data (decisions.md, Teams).
 */
export function requireUser(ctx: AppContext): Hook {
  return async (req) => {
    const userId = await sessionUserId(ctx, req);
    if (!userId) throw bearer(req) !== null && !req.cookies?.[SESSION_COOKIE] ? sessionNeeded() : unauthorized();
    req.userId = userId;
  };
}

/** Dashboard routes: a secret key, or a session cookie plus `X-Project-Id` naming a project the user belongs to. */
export function requireProject(ctx: AppContext): Hook {
  return async (req) => {
    const key = bearer(req);
    if (key !== null || !req.cookies?.[SESSION_COOKIE]) {
      if (key === null) throw invalidKey('Missing API key: send Authorization: Bearer <key>');
      req.auth = await projectFromKey(ctx, key, 'secret');
      return;
    }
    const userId = await sessionUserId(ctx, req);
    if (!userId) throw unauthorized();
    const projectId = req.headers['x-project-id'];
    if (typeof projectId !== 'string' || projectId === '') {
      throw new ApiError(400, 'BAD_REQUEST', 'X-Project-Id header is required with a session cookie');
    }
    const role = await membershipRole(ctx.database.db, projectId, userId);
    if (!role) throw new ApiError(403, 'FORBIDDEN', 'You are not a member of this project');
    req.userId = userId;
    req.auth = { projectId, role, userId, keyType: null };
  };
}

/** The user's role in the project, or null when not a member (`db` may be a transaction). */
export async function membershipRole(db: Db, projectId: string, userId: string): Promise<Role | null> {
  const [row] = await db
    .select({ role: memberships.role })
    .from(memberships)
    .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)));
  return (row?.role as Role | undefined) ?? null;
}

/** The authenticated project of a request that passed one of the project hooks. */
export function projectOf(req: FastifyRequest): ProjectAuth {
  if (!req.auth) throw new ApiError(401, 'INVALID_API_KEY', 'Missing API key');
  return req.auth;
}

export function userOf(req: FastifyRequest): string {
  if (!req.userId) throw unauthorized();
  return req.userId;
}
