import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AppContext } from '../../context.ts';
import { SESSION_COOKIE, SESSION_TTL_SECONDS, signJwt } from '../../http/session.ts';
import { parse } from '../../http/validate.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { PAGE_HEADERS, page } from '../preferences/page.ts';
import { queueVerificationEmail, requestPasswordReset, resetPassword, verifyEmail } from './account-mail.ts';
import { emailOnlyBody, loginBody, resetPasswordBody, signupBody, tokenBody } from './schemas.ts';
import { getUser, login, signup, toUserRecord } from './service.ts';

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
    await queueVerificationEmail(ctx, user);
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

  app.post('/auth/verify-email', async (req) => toUserRecord(await verifyEmail(ctx, parse(tokenBody, req.body).token)));

  // The link in the verification email: verifies and shows a small page.
  app.get('/auth/verify-email', async (req, reply) => {
    const ok = await verifyEmail(ctx, parse(tokenBody, req.query).token).then(
      () => true,
      () => false,
    );
    return reply
      .status(ok ? 200 : 400)
      .headers(PAGE_HEADERS)
      .send(page({ title: 'Email address', message: ok ? 'Your email address is confirmed.' : 'This link is invalid or has expired.' }));
  });

  app.post('/auth/request-verification', { onRequest: requireUser(ctx) }, async (req) => {
    const user = await getUser(ctx, userOf(req));
    if (!user.emailVerifiedAt) await queueVerificationEmail(ctx, user);
    return { success: true, alreadyVerified: user.emailVerifiedAt !== null };
  });

  app.post('/auth/request-password-reset', async (req) => {
    await requestPasswordReset(ctx, parse(emailOnlyBody, req.body).email);
    return { success: true };
  });

  app.post('/auth/reset-password', async (req) => {
    const body = parse(resetPasswordBody, req.body);
    await resetPassword(ctx, body.token, body.password);
    return { success: true };
  });

  app.get('/auth/oauth-config', async () => ({ github: false, google: false }));
}
