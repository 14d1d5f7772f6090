import { and, count, eq, gt, isNull, ne } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { invitations } from '../../db/schema/members.ts';
import { memberships, projects, users } from '../../db/schema/users.ts';
import { membershipRole } from '../../http/auth.ts';
import { ApiError, limitReached } from '../../http/errors.ts';
import { signJwt, verifyJwt } from '../../tokens/jwt.ts';
import { escapeHtml } from '../../mail/locales.ts';
import { SYSTEM_MAIL_QUEUE } from '../../mail/system-mail.ts';
import { type Rule, admit } from '../auth/throttle.ts';

/**
 * Invitations by email: a signed token (purpose `invitation`, the invitation id, the invited
 * address) valid 7 days; the row makes it single-use (accepted_at) and revocable (deleted).
 */

export const INVITATION_TTL_SECONDS = 7 * 24 * 3600;
const PURPOSE = 'invitation';

/**
 * Invitation emails go out from the installation's own address to any address a project names, with
 * the project's name in them: without bounds, one sign-up could send thousands (a spam and phishing
 * relay on the operator's reputation). A project keeps at most 50 pending invitations and sends at
 * most 20 invitation emails an hour (re-inviting an address sends another).
 */
export const MAX_PENDING_INVITATIONS = 50;
const INVITATION_EMAILS: Rule = { name: 'invitation-emails', windowSeconds: 3600, slowAfter: 20, lockAt: 20, lockSeconds: 3600 };

type Invitation = typeof invitations.$inferSelect;

export function invitationLink(ctx: AppContext, invitation: { id: string; email: string }): string {
  const token = signJwt(
    'invitation',
    { purpose: PURPOSE, sub: invitation.id, email: invitation.email },
    ctx.config.jwtSecret,
    INVITATION_TTL_SECONDS,
    ctx.clock.now().getTime(),
  );
  return `${ctx.config.publicUrl}/invitations/accept?token=${token}`;
}

/** Creates (or replaces) the pending invitation of `email` and queues its email in the same transaction. */
export async function createInvitation(
  ctx: AppContext,
  projectId: string,
  invitedBy: string,
  input: { email: string; role: 'ADMIN' | 'MEMBER' },
): Promise<Invitation> {
  const now = ctx.clock.now();
  await admit(ctx, [{ rule: INVITATION_EMAILS, key: `${INVITATION_EMAILS.name}:${projectId}` }]);
  const invitation = await withTransaction(ctx.database, async ({ tx, client }) => {
    // The project's row lock serialises its invitations, so concurrent ones cannot pass the cap together.
    const [project] = await tx.select({ name: projects.name }).from(projects).where(eq(projects.id, projectId)).for('update');
    const [{ pending }] = await tx
      .select({ pending: count() })
      .from(invitations)
      .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now), ne(invitations.email, input.email)));
    if (pending >= MAX_PENDING_INVITATIONS) {
      throw limitReached(`A project can have at most ${MAX_PENDING_INVITATIONS} pending invitations; revoke one first`, MAX_PENDING_INVITATIONS);
    }
    await tx.delete(invitations).where(and(eq(invitations.projectId, projectId), eq(invitations.email, input.email), isNull(invitations.acceptedAt)));
    const [row] = await tx
      .insert(invitations)
      .values({
        id: uuidv7(now.getTime()),
        projectId,
        email: input.email,
        role: input.role,
        invitedBy,
        createdAt: now,
        expiresAt: new Date(now.getTime() + INVITATION_TTL_SECONDS * 1000),
      })
      .returning();
    const link = invitationLink(ctx, row);
    await ctx.jobs.send(
      SYSTEM_MAIL_QUEUE,
      {
        to: input.email,
        subject: `You are invited to ${project.name} on Herald`,
        html:
          `<p>You are invited to join the project <strong>${escapeHtml(project.name)}</strong> on Herald as ${input.role}.</p>` +
          `<p>Sign up or sign in with this address (${escapeHtml(input.email)}), then open this link within 7 days:</p>` +
          `<p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>`,
      },
      { client },
    );
    return row;
  });
  ctx.jobs.wake(SYSTEM_MAIL_QUEUE);
  return invitation;
}

const invalidLink = () => new ApiError(400, 'BAD_REQUEST', 'This invitation link is invalid, was already used, was revoked or has expired');

/**
 * The signed-in user accepts: the token must be valid, the invitation pending and unexpired, and
 * the account's address the invited one (403 otherwise, and the invitation stays usable).
 * Holding the token, which was only ever emailed to that address, is what proves the inbox: an
 * account's `emailVerifiedAt` is not required (it only records a use of the separate verify-email
 * link, and a new invitee would have to wait for a second email for nothing).
 */
export async function acceptInvitation(ctx: AppContext, userId: string, token: string): Promise<{ projectId: string; role: 'ADMIN' | 'MEMBER' }> {
  const now = ctx.clock.now();
  const claims = verifyJwt(token, 'invitation', ctx.config.jwtSecret, now.getTime());
  if (!claims || claims.purpose !== PURPOSE || typeof claims.sub !== 'string' || !UUID.test(claims.sub)) throw invalidLink();
  const invitationId = claims.sub;
  const [user] = await ctx.database.db.select({ email: users.email }).from(users).where(eq(users.id, userId));
  if (!user) throw new ApiError(401, 'UNAUTHORIZED', 'Not signed in or the session has expired');
  return withTransaction(ctx.database, async ({ tx }) => {
    const [invitation] = await tx
      .select()
      .from(invitations)
      .where(and(eq(invitations.id, invitationId), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now)))
      .for('update');
    if (!invitation || invitation.email !== claims.email) throw invalidLink();
    if (invitation.email !== user.email) {
      throw new ApiError(403, 'FORBIDDEN', 'This invitation was sent to another address; sign in with that address to accept it');
    }
    await tx.update(invitations).set({ acceptedAt: now, acceptedBy: userId }).where(eq(invitations.id, invitationId));
    // Already a member (an invitation sent while an earlier one was being accepted): keep the current role.
    await tx.insert(memberships).values({ projectId: invitation.projectId, userId, role: invitation.role, createdAt: now }).onConflictDoNothing();
    const role = await membershipRole(tx, invitation.projectId, userId);
    return { projectId: invitation.projectId, role: role as 'ADMIN' | 'MEMBER' };
  });
}
