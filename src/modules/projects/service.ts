import { randomBytes } from 'node:crypto';
import { and, desc, eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { prefixedId, randomBase62 } from '../../db/ids.ts';
import { memberships, projects } from '../../db/schema/users.ts';
import { type Role, assertCanManage } from '../../http/auth.ts';
import { ApiError, notFound } from '../../http/errors.ts';
import type { ProjectRecord } from './schemas.ts';

type ProjectRow = typeof projects.$inferSelect;

const newKeys = () => ({ publicKey: `pk_${randomBase62(48)}`, secretKey: `sk_${randomBase62(48)}` });

export function toProjectRecord(p: ProjectRow, role: Role): ProjectRecord {
  return {
    id: p.id,
    name: p.name,
    publicKey: p.publicKey,
    secretKey: p.secretKey,
    disabled: p.disabled,
    disabledReason: p.disabledReason,
    tracking: p.tracking as ProjectRecord['tracking'],
    language: p.language,
    role,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

export async function createProject(ctx: AppContext, userId: string, input: { name: string }): Promise<ProjectRecord> {
  return withTransaction(ctx.database, async ({ tx }) => {
    const [project] = await tx
      .insert(projects)
      .values({ id: prefixedId('prj'), name: input.name, ...newKeys(), webhookSecret: randomBytes(32).toString('hex') })
      .returning();
    await tx.insert(memberships).values({ projectId: project.id, userId, role: 'OWNER' });
    return toProjectRecord(project, 'OWNER');
  });
}

export async function listProjects(ctx: AppContext, userId: string): Promise<ProjectRecord[]> {
  const rows = await ctx.database.db
    .select({ project: projects, role: memberships.role })
    .from(memberships)
    .innerJoin(projects, eq(projects.id, memberships.projectId))
    .where(eq(memberships.userId, userId))
    .orderBy(desc(memberships.createdAt));
  return rows.map((r) => toProjectRecord(r.project, r.role as Role));
}

/** The project with the caller's role; 404 when it does not exist or the user is not a member (no leak). */
export async function projectForUser(ctx: AppContext, userId: string, projectId: string) {
  const [row] = await ctx.database.db
    .select({ project: projects, role: memberships.role })
    .from(memberships)
    .innerJoin(projects, eq(projects.id, memberships.projectId))
    .where(and(eq(memberships.userId, userId), eq(memberships.projectId, projectId)));
  if (!row) throw notFound('project', projectId);
  return { project: row.project, role: row.role as Role };
}

export async function regenerateKeys(ctx: AppContext, userId: string, projectId: string): Promise<ProjectRecord> {
  const { role } = await projectForUser(ctx, userId, projectId);
  assertCanManage({ projectId, role, userId, keyType: null });
  return withTransaction(ctx.database, async ({ tx, client }) => {
    const [project] = await tx
      .update(projects)
      .set({ ...newKeys(), updatedAt: new Date() })
      .where(eq(projects.id, projectId))
      .returning();
    await ctx.keys.notifyChanged(projectId, client);
    return toProjectRecord(project, role);
  });
}

export async function updateProject(
  ctx: AppContext,
  userId: string,
  projectId: string,
  input: { name?: string; tracking?: ProjectRecord['tracking']; language?: string },
): Promise<ProjectRecord> {
  const { role } = await projectForUser(ctx, userId, projectId);
  assertCanManage({ projectId, role, userId, keyType: null });
  const [project] = await ctx.database.db
    .update(projects)
    .set({ ...input, updatedAt: new Date() })
    .where(eq(projects.id, projectId))
    .returning();
  return toProjectRecord(project, role);
}

export async function deleteProject(ctx: AppContext, userId: string, projectId: string): Promise<void> {
  const { role } = await projectForUser(ctx, userId, projectId);
  if (role !== 'OWNER') throw new ApiError(403, 'FORBIDDEN', 'Only the project owner can delete it');
  await withTransaction(ctx.database, async ({ tx, client }) => {
    await tx.delete(projects).where(eq(projects.id, projectId));
    await ctx.keys.notifyChanged(projectId, client);
  });
}
