import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AppContext } from '../../context.ts';
import { SESSION_COOKIE, SESSION_TTL_SECONDS, signJwt } from '../../http/session.ts';
import { parse } from '../../http/validate.ts';
import { loginBody, signupBody } from './schemas.ts';
import { login, signup, toUserRecord } from './service.ts';

export function authRoutes(app: FastifyInstance, ctx: AppContext): void {
  const setSession = (reply: FastifyReply, userId: string) =>
    reply.setCookie(SESSION_COOKIE, signJwt({ sub: userId }, ctx.config.jwtSecret, SESSION_TTL_SECONDS), {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure: ctx.config.publicUrl.startsWith('https://'),
      maxAge: SESSION_TTL_SECONDS,
    });

  app.post('/auth/signup', async (req, reply) => {
    const user = await signup(ctx, parse(signupBody, req.body));
    setSession(reply, user.id);
    return reply.status(201).send(toUserRecord(user));
  });

  app.post('/auth/login', async (req, reply) => {
    const user = await login(ctx, parse(loginBody, req.body));
    setSession(reply, user.id);
    return toUserRecord(user);
  });

  app.get('/auth/logout', async (_req, reply) => {
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return { success: true };
  });

  app.get('/auth/oauth-config', async () => ({ github: false, google: false }));
}
