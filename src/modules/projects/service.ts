import { randomBytes } from 'node:crypto';
import { and, count, desc, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { prefixedId } from '../../db/ids.ts';
import { newProjectKeys } from '../../http/api-keys.ts';
import { memberships, projects } from '../../db/schema/users.ts';
import type { Role } from '../../db/schema/users.ts';
import { pgErrorCode } from '../../db/pg-error.ts';
import { limitReached, notFound, validationError } from '../../http/errors.ts';
import { projectUploadKeys, removeProjectUploads } from '../uploads/service.ts';
import { lockProject, stopPendingSends } from './lifecycle.ts';
import { markDeleted, purgeInRequest, queuePurge } from './purge.ts';
import type { ProjectRecord } from './schemas.ts';

type ProjectRow = typeof projects.$inferSelect;

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('hex')}`;

/**
 * `secretKey` is the key in clear, known only right after it was created or rotated.
 * `webhookSecret` is for ADMIN and OWNER only: a MEMBER could otherwise keep it after leaving.
 */
export function toProjectRecord(p: ProjectRow, role: Role, secretKey: string | null = null): ProjectRecord {
  return {
    id: p.id,
    name: p.name,
    publicKey: p.publicKey,
    secretKey,
    secretKeyPrefix: p.secretKeyPrefix,
    disabled: p.disabled,
    disabledReason: p.disabledReason,
    tracking: p.tracking as ProjectRecord['tracking'],
    language: p.language,
    webhookSecret: role === 'MEMBER' ? null : p.webhookSecret,
    timezone: p.timezone,
    postalAddress: p.postalAddress,
    role,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

export async function createProject(ctx: AppContext, userId: string, input: { name: string }): Promise<ProjectRecord> {
  const keys = newProjectKeys(ctx.config.jwtSecret);
  return withTransaction(ctx.database, async ({ tx }) => {
    await assertUnderProjectCap(ctx, tx, userId);
    const [project] = await tx
      .insert(projects)
      .values({ id: prefixedId('prj'), name: input.name, publicKey: keys.publicKey, ...keys.stored, webhookSecret: newWebhookSecret() })
      .returning();
    await tx.insert(memberships).values({ projectId: project.id, userId, role: 'OWNER' });
    return toProjectRecord(project, 'OWNER', keys.secretKey);
  });
}

/** Each project has its own budgets, so one user may own at most MAX_PROJECTS_PER_USER (serialised per user). */
async function assertUnderProjectCap(ctx: AppContext, tx: Db, userId: string): Promise<void> {
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${`project-cap:${userId}`}))`);
  const [{ owned }] = await tx
    .select({ owned: count() })
    .from(memberships)
    .where(and(eq(memberships.userId, userId), eq(memberships.role, 'OWNER')));
  const limit = ctx.config.maxProjectsPerUser;
  if (owned >= limit) {
    throw limitReached(`A user can own at most ${limit} projects; delete one first`, limit);
  }
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
  const keys = newProjectKeys(ctx.config.jwtSecret);
  return withTransaction(ctx.database, async ({ tx, client }) => {
    const [project] = await tx
      .update(projects)
      .set({ publicKey: keys.publicKey, ...keys.stored, secretKey: null, updatedAt: new Date() })
      .where(eq(projects.id, projectId))
      .returning();
    await ctx.keys.notifyChanged(projectId, client);
    return toProjectRecord(project, role, keys.secretKey);
  });
}

export async function updateProject(
  ctx: AppContext,
  userId: string,
  projectId: string,
  input: { name?: string; tracking?: ProjectRecord['tracking']; language?: string; timezone?: string; postalAddress?: string | null },
): Promise<ProjectRecord> {
  const { role } = await projectForUser(ctx, userId, projectId);
  if (input.timezone !== undefined) await checkDatabaseTimeZone(ctx.database.db, input.timezone);
  const [project] = await ctx.database.db
    .update(projects)
    .set({ ...input, updatedAt: new Date() })
    .where(eq(projects.id, projectId))
    .returning();
  return toProjectRecord(project, role);
}

/**
 * The analytics buckets are made by PostgreSQL in the project's time zone: one that Node's ICU
 * knows but PostgreSQL's zone files do not (`US/Pacific-New`) made every analytics read of the
 * project a 400 afterwards, so it is refused here.
 */
async function checkDatabaseTimeZone(db: Db, timezone: string): Promise<void> {
  try {
    await db.execute(sql`SELECT now() AT TIME ZONE ${timezone}`);
  } catch (err) {
    if (pgErrorCode(err) !== '22023') throw err;
    throw validationError([{ field: 'timezone', code: 'custom', message: `The database does not know the time zone ${timezone}` }]);
  }
}

/**
 * Deletes the project: in one short transaction it is gone for its users (keys refused, out of
 * every list, no more sends: purge.ts markDeleted) and a job that removes its rows in batches is
 * queued (durable: it survives a restart); once that has committed, its uploaded images are
 * removed, and its rows for up to 2 s (most projects whole; the job does the rest).
 */
export async function deleteProject(ctx: AppContext, userId: string, projectId: string): Promise<void> {
  await projectForUser(ctx, userId, projectId);
  const uploadKeys = await withTransaction(ctx.database, async ({ tx, client }) => {
    await lockProject(tx, projectId);
    // A delete of the same project that committed while this one waited for the lock.
    if (!(await markDeleted(tx, projectId))) throw notFound('project', projectId);
    await stopPendingSends(tx, projectId);
    const keys = await projectUploadKeys(ctx, tx, projectId);
    await queuePurge(ctx, projectId, client);
    await ctx.keys.notifyChanged(projectId, client);
    return keys;
  });
  await removeProjectUploads(ctx, projectId, uploadKeys);
  await purgeInRequest(ctx, projectId);
}

/** A new webhook signing secret; the old one stops being used at once (receivers must switch). */
export async function regenerateWebhookSecret(ctx: AppContext, userId: string, projectId: string): Promise<ProjectRecord> {
  const { role } = await projectForUser(ctx, userId, projectId);
  const [project] = await ctx.database.db
    .update(projects)
    .set({ webhookSecret: newWebhookSecret(), updatedAt: new Date() })
    .where(eq(projects.id, projectId))
    .returning();
  return toProjectRecord(project, role);
}
