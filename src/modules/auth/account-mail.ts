import { createHash } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { QueueDef } from '../../jobs/boss.ts';
import type { AppContext } from '../../context.ts';
import { users } from '../../db/schema/users.ts';
import { ApiError } from '../../http/errors.ts';
import { signJwt, verifyJwt } from '../../tokens/jwt.ts';
import { endAllSessions } from '../../http/sessions.ts';
import { withTransaction } from '../../db/client.ts';
import { hashPassword } from './password.ts';
import { mayMailReset, mayMailVerification } from './throttle.ts';
import { escapeHtml } from '../../mail/locales.ts';
import { SYSTEM_MAIL_QUEUE } from '../../mail/system-mail.ts';

type Purpose = 'verify-email' | 'reset-password';

const TTL = { 'verify-email': 7 * 24 * 3600, 'reset-password': 3600 } as const;

/** A reset token names the password it may replace, so it stops working once used. */
const passwordFingerprint = (hash: string) => createHash('sha256').update(hash).digest('base64url').slice(0, 16);

function tokenFor(ctx: AppContext, purpose: Purpose, user: { id: string; passwordHash: string }): string {
  const claims: Record<string, unknown> = { sub: user.id };
  if (purpose === 'reset-password') claims.pwd = passwordFingerprint(user.passwordHash);
  return signJwt(purpose, claims, ctx.config.jwtSecret, TTL[purpose]);
}

async function userFromToken(ctx: AppContext, token: string, purpose: Purpose) {
  const claims = verifyJwt(token, purpose, ctx.config.jwtSecret);
  if (!claims || typeof claims.sub !== 'string') return null;
  const [user] = await ctx.database.db.select().from(users).where(eq(users.id, claims.sub));
  if (!user) return null;
  if (purpose === 'reset-password' && claims.pwd !== passwordFingerprint(user.passwordHash)) return null;
  return user;
}

const invalidToken = () => new ApiError(400, 'BAD_REQUEST', 'The token is invalid or has expired');

/** Queues the confirmation link, at most once per account per 5 minutes (a resend loop must not mail an inbox). */
export async function queueVerificationEmail(ctx: AppContext, user: { id: string; email: string; passwordHash: string }) {
  if (!(await mayMailVerification(ctx, user.id))) return;
  const link = `${ctx.config.publicUrl}/auth/verify-email?token=${tokenFor(ctx, 'verify-email', user)}`;
  await ctx.jobs.send(SYSTEM_MAIL_QUEUE, {
    to: user.email,
    subject: 'Confirm your email address',
    html: `<p>Confirm the email address of your Herald account:</p><p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>`,
  });
  ctx.jobs.wake(SYSTEM_MAIL_QUEUE);
}

export async function verifyEmail(ctx: AppContext, token: string): Promise<typeof users.$inferSelect> {
  const user = await userFromToken(ctx, token, 'verify-email');
  if (!user) throw invalidToken();
  if (user.emailVerifiedAt) return user;
  const [updated] = await ctx.database.db
    .update(users)
    .set({ emailVerifiedAt: ctx.clock.now(), updatedAt: ctx.clock.now() })
    .where(eq(users.id, user.id))
    .returning();
  return updated;
}

export const PASSWORD_RESET_QUEUE = 'password-reset-request';

/**
 * Always succeeds, whether or not the address has an account (no account enumeration), and does
 * the same work either way: it queues the request, and a worker looks the address up
 * (`mailPasswordReset`). Looking it up here made a known address's answer about 2 ms slower.
 */
export async function requestPasswordReset(ctx: AppContext, email: string): Promise<void> {
  await ctx.jobs.send(PASSWORD_RESET_QUEUE, { email });
  ctx.jobs.wake(PASSWORD_RESET_QUEUE);
}

/**
 * Queues the reset email of a known address, once per 5 minutes. The window is taken in the same
 * transaction that queues the email: a failed run leaves neither, and its retry sends it.
 */
async function mailPasswordReset(ctx: AppContext, { email }: { email: string }): Promise<void> {
  const [user] = await ctx.database.db.select().from(users).where(eq(users.email, email));
  if (!user) return;
  const link = `${ctx.config.publicUrl}/app/reset-password?token=${tokenFor(ctx, 'reset-password', user)}`;
  const queued = await withTransaction(ctx.database, async ({ tx, client }) => {
    if (!(await mayMailReset(ctx, user.email, tx))) return false;
    await ctx.jobs.send(
      SYSTEM_MAIL_QUEUE,
      {
        to: user.email,
        subject: 'Reset your Herald password',
        html: `<p>Someone asked to reset the password of your Herald account. If it was you, use this link within an hour:</p><p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p><p>Otherwise ignore this email.</p>`,
      },
      { client },
    );
    return true;
  });
  if (queued) ctx.jobs.wake(SYSTEM_MAIL_QUEUE);
}

export async function resetPassword(ctx: AppContext, token: string, password: string): Promise<void> {
  const user = await userFromToken(ctx, token, 'reset-password');
  if (!user) throw invalidToken();
  const passwordHash = await hashPassword(password);
  // A reset is what someone does who fears their account is used by another: every session ends.
  await withTransaction(ctx.database, async ({ tx }) => {
    // Only over the password the token was checked against: of concurrent uses of one token
    // (each checked before any hashed), the first to write wins and the others are a used token.
    const changed = await tx
      .update(users)
      .set({ passwordHash, updatedAt: ctx.clock.now() })
      .where(and(eq(users.id, user.id), eq(users.passwordHash, user.passwordHash)))
      .returning({ id: users.id });
    if (changed.length === 0) throw invalidToken();
    await endAllSessions(tx, user.id);
  });
}

export const passwordResetQueue: QueueDef<{ email: string }> = {
  name: PASSWORD_RESET_QUEUE,
  schema: z.object({ email: z.string() }),
  handler: mailPasswordReset,
  retryLimit: 8,
  retryDelaySeconds: 30,
};
