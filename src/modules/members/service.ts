import { and, asc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { UUID } from '../../db/ids.ts';
import { invitations } from '../../db/schema/members.ts';
import { memberships, users } from '../../db/schema/users.ts';
import type { Role } from '../../db/schema/users.ts';

/** Who acts on the project's members: a signed-in user with their role (API keys are refused, members/routes.ts). */
export type Actor = { projectId: string; userId: string; role: Role };
import { ApiError, conflict, notFound } from '../../http/errors.ts';
import { createInvitation } from './invitations.ts';
import type { InvitationRecord, MemberList, MemberRecord } from './schemas.ts';

/** Members and roles of a project (decisions.md § 2). Who may call what is decided in `http/roles.ts`. */

const toInvitation = (r: typeof invitations.$inferSelect): InvitationRecord => ({
  id: r.id,
  email: r.email,
  role: r.role,
  invitedBy: r.invitedBy,
  createdAt: r.createdAt.toISOString(),
  expiresAt: r.expiresAt.toISOString(),
});

export async function listMembers(ctx: AppContext, projectId: string): Promise<MemberList> {
  const rows = await ctx.database.db
    .select({ userId: users.id, email: users.email, role: memberships.role, createdAt: memberships.createdAt })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(eq(memberships.projectId, projectId))
    .orderBy(asc(memberships.createdAt), asc(users.id));
  const pending = await ctx.database.db
    .select()
    .from(invitations)
    .where(and(eq(invitations.projectId, projectId), isNull(invitations.acceptedAt), gt(invitations.expiresAt, ctx.clock.now())))
    .orderBy(asc(invitations.createdAt));
  return {
    members: rows.map((r) => ({ userId: r.userId, email: r.email, role: r.role as Role, createdAt: r.createdAt.toISOString() })),
    invitations: pending.map(toInvitation),
  };
}

export type InviteResult = { status: 'invited'; invitation: InvitationRecord };

/**
 * Every address gets an invitation email, whether or not it has an account: the answer is the same
 * either way (no account enumeration), each one counts against the invitation throttle, and only
 * who reads that inbox can join, never someone who merely signed up with the address first.
 */
export async function addMember(ctx: AppContext, actor: Actor, input: { email: string; role: 'ADMIN' | 'MEMBER' }): Promise<InviteResult> {
  // The caller can list the project's members anyway, so saying this one is already in reveals nothing.
  if (await isMemberByEmail(ctx, actor.projectId, input.email)) {
    throw conflict(`${input.email} is already a member of this project`, { email: input.email });
  }
  const invitation = await createInvitation(ctx, actor.projectId, actor.userId, input);
  return { status: 'invited', invitation: toInvitation(invitation) };
}

async function isMemberByEmail(ctx: AppContext, projectId: string, email: string): Promise<boolean> {
  const rows = await ctx.database.db
    .select({ userId: memberships.userId })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(and(eq(memberships.projectId, projectId), eq(users.email, email)));
  return rows.length > 0;
}

async function memberRow(ctx: AppContext, projectId: string, userId: string) {
  const [row] = await ctx.database.db
    .select({ userId: users.id, email: users.email, role: memberships.role, createdAt: memberships.createdAt })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)));
  if (!row) throw notFound('member', userId);
  return { ...row, role: row.role as Role };
}

const ownerIsFixed = (what: string) => new ApiError(403, 'FORBIDDEN', `The project owner cannot be ${what}`);

/**
 * The pending invitations a member sent to the project, revoked when they leave it or become a
 * MEMBER: each one grants its role as it was sent, so an ADMIN removed or demoted would otherwise
 * get back in as ADMIN through an invitation to another address of theirs.
 */
const revokeInvitationsSentBy = (tx: Db, projectId: string, userId: string) =>
  tx.delete(invitations).where(and(eq(invitations.projectId, projectId), eq(invitations.invitedBy, userId), isNull(invitations.acceptedAt)));

export async function updateMemberRole(ctx: AppContext, projectId: string, userId: string, role: 'ADMIN' | 'MEMBER'): Promise<MemberRecord> {
  const member = await memberRow(ctx, projectId, userId);
  if (member.role === 'OWNER') throw ownerIsFixed('demoted');
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx
      .update(memberships)
      .set({ role })
      .where(and(eq(memberships.projectId, projectId), eq(memberships.userId, userId)));
    if (role === 'MEMBER') await revokeInvitationsSentBy(tx, projectId, userId);
  });
  return { userId, email: member.email, role, createdAt: member.createdAt.toISOString() };
}

/** ADMIN and OWNER remove anyone but the owner; a MEMBER only themselves. The last ADMIN-or-OWNER stays. */
export async function removeMember(ctx: AppContext, actor: Actor, userId: string): Promise<void> {
  if (actor.role === 'MEMBER' && actor.userId !== userId) {
    throw new ApiError(403, 'FORBIDDEN', 'This action needs the ADMIN role; you are MEMBER');
  }
  await withTransaction(ctx.database, async ({ tx }) => {
    // Lock the project's memberships so two concurrent removals cannot both pass the last-admin check.
    const rows = await tx
      .select({ userId: memberships.userId, role: memberships.role })
      .from(memberships)
      .where(eq(memberships.projectId, actor.projectId))
      .for('update');
    const target = rows.find((r) => r.userId === userId);
    if (!target) throw notFound('member', userId);
    if (target.role === 'OWNER') throw ownerIsFixed('removed');
    const managers = rows.filter((r) => r.userId !== userId && (r.role === 'OWNER' || r.role === 'ADMIN'));
    if (managers.length === 0) throw conflict('The last ADMIN or OWNER of a project cannot be removed');
    await tx.delete(memberships).where(and(eq(memberships.projectId, actor.projectId), eq(memberships.userId, userId)));
    await revokeInvitationsSentBy(tx, actor.projectId, userId);
  });
}

export async function revokeInvitation(ctx: AppContext, projectId: string, invitationId: string): Promise<void> {
  const deleted = UUID.test(invitationId)
    ? await ctx.database.db
        .delete(invitations)
        .where(and(eq(invitations.projectId, projectId), eq(invitations.id, invitationId), isNull(invitations.acceptedAt)))
        .returning({ id: invitations.id })
    : [];
  if (deleted.length === 0) throw notFound('invitation', invitationId);
}

/** The owner's address(es) of a project (billing warnings go there). */
export async function projectOwnerEmails(ctx: AppContext, projectId: string): Promise<string[]> {
  const rows = await ctx.database.db
    .select({ email: users.email })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(and(eq(memberships.projectId, projectId), eq(memberships.role, 'OWNER')))
    .orderBy(sql`${memberships.createdAt}`);
  return rows.map((r) => r.email);
}
