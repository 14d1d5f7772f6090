import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { SESSION_COOKIE, SESSION_TTL_SECONDS } from '../../http/sessions.ts';
import { endAllSessions, endSession, sessionIdOf, startSession } from '../../http/sessions.ts';
import { ApiError, forbidden } from '../../http/errors.ts';
import { describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { requireUser, userOf } from '../../http/auth.ts';
import { PAGE_HEADERS, page } from '../preferences/page.ts';
import { queueVerificationEmail, requestPasswordReset, resetPassword, verifyEmail } from './account-mail.ts';
import { changePasswordBody, emailOnlyBody, loginBody, resetPasswordBody, signupBody, tokenBody } from './schemas.ts';
import { isHashingBusy } from './password.ts';
import { changePassword, getUser, login, signup, toUserRecord } from './service.ts';
import { RULES, type Throttled, admit, byAccount, byIp, clear, signupRule, uncount } from './throttle.ts';

const userSchema = z.object({ id: z.string(), email: z.string(), emailVerified: z.boolean(), createdAt: z.string(), updatedAt: z.string() });
const okSchema = z.object({ success: z.literal(true) });
const doc = describer('Auth', 'session');

/** Open to anyone, and a password or token is all they carry: a larger body is 413 before it is parsed. */
const AUTH_BODY_LIMIT = 16 * 1024;

/** A `.catch` handler: gives the attempt back on the keys when the error is one `when` names, and rethrows. */
const uncountIf =
  (ctx: AppContext, when: (err: unknown) => boolean, keys: Throttled[]) =>
  async (err: unknown): Promise<never> => {
    if (when(err)) await uncount(ctx, keys);
    throw err;
  };

const isNot = (status: number) => (err: unknown) => !(err instanceof ApiError && err.statusCode === status);

export function authRoutes(app: FastifyInstance, ctx: AppContext): void {
  // Returns nothing: a Fastify reply is thenable, and awaiting it would wait for the response itself.
  const setSession = async (reply: FastifyReply, userId: string): Promise<void> => {
    reply.setCookie(SESSION_COOKIE, await startSession(ctx, userId), {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure: ctx.config.publicUrl.startsWith('https://'),
      maxAge: SESSION_TTL_SECONDS,
    });
  };

  app.post(
    '/auth/signup',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.signup',
        summary: 'Create an account (starts a session cookie)',
        access: 'none',
        body: signupBody,
        responses: { 201: userSchema },
        errors: [403, 409, 429],
      }),
    },
    async (req, reply) => {
      const ip = [byIp(signupRule(ctx.config.signupsPerIpPerHour), req.ip)];
      await admit(ctx, ip);
      const user = await signup(ctx, parse(signupBody, req.body)).catch(uncountIf(ctx, isHashingBusy, ip));
      await queueVerificationEmail(ctx, user);
      await setSession(reply, user.id);
      return reply.status(201).send(toUserRecord(user));
    },
  );

  app.post(
    '/auth/login',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.login',
        answeredWhenDiskFull: true,
        summary: 'Sign in (sets the session cookie)',
        access: 'none',
        body: loginBody,
        responses: { 200: userSchema },
        errors: [401, 429],
      }),
    },
    async (req, reply) => {
      const body = parse(loginBody, req.body);
      const keys = [byIp(RULES.loginIp, req.ip), byAccount(RULES.loginAccount, body.email)];
      // Counted as a failure before the password is checked; given back unless it is one.
      await admit(ctx, keys);
      const user = await login(ctx, body).catch(uncountIf(ctx, isNot(401), keys));
      const [ipKey, accountKey] = keys;
      await Promise.all([uncount(ctx, [ipKey]), clear(ctx, [accountKey])]);
      await setSession(reply, user.id);
      return toUserRecord(user);
    },
  );

  app.get(
    '/auth/logout',
    { schema: doc({ operationId: 'auth.logout', summary: 'Sign out (ends this session)', access: 'none', responses: { 200: okSchema }, errors: [403] }) },
    async (req, reply) => {
      // A GET carries the SameSite=Lax cookie on a top-level navigation from any site, so a link or
      // redirect elsewhere could sign the user out; browsers say where such a request came from.
      const from = req.headers['sec-fetch-site'];
      if (from === 'cross-site' || from === 'same-site')
        throw forbidden('Signing out is only possible from Herald itself: this request came from another site');
      await endSession(ctx, req);
      reply.clearCookie(SESSION_COOKIE, { path: '/' });
      return { success: true };
    },
  );

  // Ends every session of the user, on every device (docs/decisions.md § Sessions).
  app.post(
    '/auth/logout-all',
    {
      schema: doc({ operationId: 'auth.logoutAll', summary: 'End every session of the user', responses: { 200: okSchema }, answeredWhenDiskFull: true }),
      onRequest: requireUser(ctx),
    },
    async (req, reply) => {
      await endAllSessions(ctx.database.db, userOf(req));
      reply.clearCookie(SESSION_COOKIE, { path: '/' });
      return { success: true };
    },
  );

  app.post(
    '/auth/change-password',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.changePassword',
        answeredWhenDiskFull: true,
        summary: 'Change the password (other sessions end)',
        body: changePasswordBody,
        responses: { 200: okSchema },
        errors: [400, 403, 429],
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => {
      const body = parse(changePasswordBody, req.body);
      const user = await getUser(ctx, userOf(req));
      // A wrong current password counts against the account as a failed login does: a stolen
      // session must not be a way to guess the password without the login's limit.
      const account = [byAccount(RULES.loginAccount, user.email)];
      await admit(ctx, account);
      await changePassword(ctx, user, sessionIdOf(ctx, req), body).catch(uncountIf(ctx, isNot(403), account));
      await clear(ctx, account);
      return { success: true };
    },
  );

  app.post(
    '/auth/verify-email',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.verifyEmail',
        answeredWhenDiskFull: true,
        summary: 'Confirm the email address with the emailed token',
        access: 'none',
        body: tokenBody,
        responses: { 200: userSchema },
        errors: [400],
      }),
    },
    async (req) => toUserRecord(await verifyEmail(ctx, parse(tokenBody, req.body).token)),
  );

  // The link in the verification email: verifies and shows a small page.
  app.get(
    '/auth/verify-email',
    {
      schema: doc({
        operationId: 'auth.verifyEmailLink',
        summary: 'The emailed confirmation link (HTML page)',
        access: 'none',
        query: tokenBody,
        responses: { 200: { schema: null, contentType: 'text/html', description: 'A page saying whether it worked' } },
      }),
    },
    async (req, reply) => {
      const ok = await verifyEmail(ctx, parse(tokenBody, req.query).token).then(
        () => true,
        () => false,
      );
      return reply
        .status(ok ? 200 : 400)
        .headers(PAGE_HEADERS)
        .send(page({ title: 'Email address', message: ok ? 'Your email address is confirmed.' : 'This link is invalid or has expired.' }));
    },
  );

  app.post(
    '/auth/request-verification',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.requestVerification',
        answeredWhenDiskFull: true,
        summary: 'Email a new confirmation link',
        responses: { 200: okSchema.extend({ alreadyVerified: z.boolean() }) },
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => {
      const user = await getUser(ctx, userOf(req));
      if (!user.emailVerifiedAt) await queueVerificationEmail(ctx, user);
      return { success: true, alreadyVerified: user.emailVerifiedAt !== null };
    },
  );

  app.post(
    '/auth/request-password-reset',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.requestPasswordReset',
        answeredWhenDiskFull: true,
        summary: 'Email a password reset link (same answer for unknown addresses)',
        access: 'none',
        body: emailOnlyBody,
        responses: { 200: okSchema },
        errors: [429],
      }),
    },
    async (req) => {
      const ip = [byIp(RULES.resetRequestIp, req.ip)];
      await admit(ctx, ip);
      await requestPasswordReset(ctx, parse(emailOnlyBody, req.body).email);
      return { success: true };
    },
  );

  app.post(
    '/auth/reset-password',
    {
      bodyLimit: AUTH_BODY_LIMIT,
      schema: doc({
        operationId: 'auth.resetPassword',
        answeredWhenDiskFull: true,
        summary: 'Set a new password with the emailed token',
        access: 'none',
        body: resetPasswordBody,
        responses: { 200: okSchema },
        errors: [400, 429],
      }),
    },
    async (req) => {
      const body = parse(resetPasswordBody, req.body);
      const ip = [byIp(RULES.tokenIp, req.ip)];
      // Counted as a bad token before it is checked; given back unless it is one.
      await admit(ctx, ip);
      await resetPassword(ctx, body.token, body.password).catch(uncountIf(ctx, isNot(400), ip));
      await uncount(ctx, ip);
      return { success: true };
    },
  );

  app.get(
    '/auth/oauth-config',
    {
      schema: doc({
        operationId: 'auth.oauthConfig',
        summary: 'Which OAuth providers are enabled',
        access: 'none',
        responses: { 200: z.object({ github: z.boolean(), google: z.boolean() }) },
      }),
    },
    async () => ({ github: false, google: false }),
  );
}
