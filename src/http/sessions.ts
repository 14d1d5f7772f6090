import { randomBytes } from 'node:crypto';
import { and, eq, gt, ne, sql } from 'drizzle-orm';
import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/client.ts';
import { sessions } from '../db/schema/sessions.ts';
import { signJwt, verifyJwt } from '../tokens/jwt.ts';

export const SESSION_COOKIE = 'herald_session';
export const SESSION_TTL_SECONDS = 30 * 24 * 3600;

/**
 * Revocable dashboard sessions. The cookie is a `typ: session` token naming a row of `sessions`;
 * every cookie request looks the row up (one primary-key read, no cache, so a revocation holds in
 * every process at once). Logout deletes the row; logout-all, a password reset and a password
 * change delete all of the user's rows.
 */

/** Older sessions beyond this many per user are ended when a new one starts. */
export const MAX_SESSIONS_PER_USER = 20;

type SessionClaims = { userId: string; sessionId: string };

function claimsOf(ctx: AppContext, req: FastifyRequest): SessionClaims | null {
  const token = req.cookies?.[SESSION_COOKIE];
  if (!token) return null;
  const payload = verifyJwt(token, 'session', ctx.config.jwtSecret);
  if (!payload || typeof payload.sub !== 'string' || typeof payload.sid !== 'string') return null;
  return { userId: payload.sub, sessionId: payload.sid };
}

/** Starts a session for the user and returns the cookie value. */
export async function startSession(ctx: AppContext, userId: string): Promise<string> {
  const now = ctx.clock.now();
  const id = randomBytes(18).toString('base64url');
  const { db } = ctx.database;
  await db.insert(sessions).values({ id, userId, createdAt: now, expiresAt: new Date(now.getTime() + SESSION_TTL_SECONDS * 1000) });
  // Bound the rows per user: drop expired sessions and all but the newest MAX_SESSIONS_PER_USER.
  await db.execute(sql`
    DELETE FROM sessions WHERE user_id = ${userId} AND (expires_at <= ${now} OR id NOT IN (
      SELECT id FROM sessions WHERE user_id = ${userId} ORDER BY created_at DESC, id LIMIT ${MAX_SESSIONS_PER_USER}))`);
  return signJwt('session', { sub: userId, sid: id }, ctx.config.jwtSecret, SESSION_TTL_SECONDS);
}

/** The signed-in user of a request whose session cookie is valid and not revoked, or null. */
export async function sessionUserId(ctx: AppContext, req: FastifyRequest): Promise<string | null> {
  const claims = claimsOf(ctx, req);
  if (!claims) return null;
  const [row] = await ctx.database.db
    .select({ userId: sessions.userId })
    .from(sessions)
    .where(and(eq(sessions.id, claims.sessionId), gt(sessions.expiresAt, ctx.clock.now())));
  return row && row.userId === claims.userId ? row.userId : null;
}

/** Ends the session the request's cookie names, if any (logout). */
export async function endSession(ctx: AppContext, req: FastifyRequest): Promise<void> {
  const claims = claimsOf(ctx, req);
  if (claims) await ctx.database.db.delete(sessions).where(eq(sessions.id, claims.sessionId));
}

/** The id of the request's session, to keep it when ending the others. */
export function sessionIdOf(ctx: AppContext, req: FastifyRequest): string | null {
  return claimsOf(ctx, req)?.sessionId ?? null;
}

/** Ends every session of the user (except `keep`), in the caller's transaction when given. */
export async function endAllSessions(db: Db, userId: string, keep: string | null = null): Promise<void> {
  await db.delete(sessions).where(and(eq(sessions.userId, userId), keep ? ne(sessions.id, keep) : undefined));
}
