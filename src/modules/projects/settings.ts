import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projects } from '../../db/schema/users.ts';
import type { TrackingMode } from '../tracking/apply.ts';

/** The project's language (a primary-key lookup). */
export async function projectLanguage(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ language: projects.language }).from(projects).where(eq(projects.id, projectId));
  return row?.language ?? 'en';
}

export type ProjectForMail = { language: string; name: string; postalAddress: string | null; tracking: TrackingMode };

/**
 * What composing the project's mail needs: its language, its name and postal address for the
 * MARKETING footer, and its tracking setting. Read once per delivery batch, so a changed setting
 * applies from the next batch.
 */
export async function projectForMail(ctx: AppContext, projectId: string): Promise<ProjectForMail> {
  const [row] = await ctx.database.db
    .select({ language: projects.language, name: projects.name, postalAddress: projects.postalAddress, tracking: projects.tracking })
    .from(projects)
    .where(eq(projects.id, projectId));
  return row ? { ...row, tracking: row.tracking as TrackingMode } : { language: 'en', name: '', postalAddress: null, tracking: 'DISABLED' };
}

/** The project's IANA time zone (analytics buckets). */
export async function projectTimezone(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ timezone: projects.timezone }).from(projects).where(eq(projects.id, projectId));
  return row?.timezone ?? 'UTC';
}
