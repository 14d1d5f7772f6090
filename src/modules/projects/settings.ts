import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projects } from '../../db/schema/users.ts';

/** The project's language (a primary-key lookup). */
export async function projectLanguage(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ language: projects.language }).from(projects).where(eq(projects.id, projectId));
  return row?.language ?? 'en';
}

export type ProjectForMail = { language: string; name: string; postalAddress: string | null };

/** What composing the project's mail needs: its language, and its name and postal address for the MARKETING footer. Read once per delivery batch. */
export async function projectForMail(ctx: AppContext, projectId: string): Promise<ProjectForMail> {
  const [row] = await ctx.database.db
    .select({ language: projects.language, name: projects.name, postalAddress: projects.postalAddress })
    .from(projects)
    .where(eq(projects.id, projectId));
  return row ?? { language: 'en', name: '', postalAddress: null };
}

/** The project's IANA time zone (analytics buckets). */
export async function projectTimezone(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ timezone: projects.timezone }).from(projects).where(eq(projects.id, projectId));
  return row?.timezone ?? 'UTC';
}
