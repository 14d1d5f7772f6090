import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { prefixedId } from '../../db/ids.ts';
import { users } from '../../db/schema/users.ts';
import { ApiError } from '../../http/errors.ts';
import { endAllSessions } from '../../http/sessions.ts';
import { withTransaction } from '../../db/client.ts';
import { DUMMY_HASH, hashPassword, isOutdatedHash, verifyPassword } from './password.ts';
import type { UserRecord } from './schemas.ts';

type UserRow = typeof users.$inferSelect;

export function toUserRecord(u: UserRow): UserRecord {
  return {
    id: u.id,
    email: u.email,
    emailVerified: u.emailVerifiedAt !== null,
    createdAt: u.createdAt.toISOString(),
    updatedAt: u.updatedAt.toISOString(),
  };
}

export async function signup(ctx: AppContext, input: { email: string; password: string }): Promise<UserRow> {
  if (ctx.config.disableSignup) {
    const [{ count }] = await ctx.database.db.select({ count: sql<number>`count(*)::int` }).from(users);
    if (count > 0) throw new ApiError(403, 'FORBIDDEN', 'Sign-up is disabled on this server');
  }
  const passwordHash = await hashPassword(input.password);
  const inserted = await ctx.database.db
    .insert(users)
    .values({ id: prefixedId('usr'), email: input.email, passwordHash })
    .onConflictDoNothing()
    .returning();
  if (inserted.length === 0) {
    throw new ApiError(409, 'CONFLICT', 'An account with this email already exists', { details: { field: 'email' } });
  }
  return inserted[0];
}

export async function login(ctx: AppContext, input: { email: string; password: string }): Promise<UserRow> {
  const [user] = await ctx.database.db.select().from(users).where(eq(users.email, input.email));
  // Verify against a hash even for unknown emails so timing does not reveal which accounts exist.
  const ok = await verifyPassword(user?.passwordHash ?? DUMMY_HASH, input.password);
  if (!user || !ok) throw new ApiError(401, 'UNAUTHORIZED', 'Invalid email or password');
  if (isOutdatedHash(user.passwordHash)) await upgradeHash(ctx, user, input.password);
  return user;
}

/**
 * Re-hashes a password stored with older argon2 parameters, now that it is known (password.ts). Best
 * effort: the login has succeeded, so a busy server only leaves it for the next one.
 */
async function upgradeHash(ctx: AppContext, user: UserRow, password: string): Promise<void> {
  const passwordHash = await hashPassword(password).catch(() => null);
  if (!passwordHash) return;
  // Only if the password did not change meanwhile; updated_at stays: the user changed nothing.
  await ctx.database.db
    .update(users)
    .set({ passwordHash })
    .where(and(eq(users.id, user.id), eq(users.passwordHash, user.passwordHash)));
}

/** Sets a new password after checking the current one; every other session of the user ends. */
export async function changePassword(
  ctx: AppContext,
  user: UserRow,
  keepSessionId: string | null,
  input: { currentPassword: string; password: string },
): Promise<void> {
  const ok = await verifyPassword(user.passwordHash, input.currentPassword);
  if (!ok) throw new ApiError(403, 'FORBIDDEN', 'The current password is not correct');
  const passwordHash = await hashPassword(input.password);
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx.update(users).set({ passwordHash, updatedAt: ctx.clock.now() }).where(eq(users.id, user.id));
    await endAllSessions(tx, user.id, keepSessionId);
  });
}

export async function getUser(ctx: AppContext, userId: string): Promise<UserRow> {
  const [user] = await ctx.database.db.select().from(users).where(eq(users.id, userId));
  if (!user) throw new ApiError(401, 'UNAUTHORIZED', 'Not signed in or the session has expired');
  return user;
}
