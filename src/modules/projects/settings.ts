import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { projects } from '../../db/schema/users.ts';

/** The project's language, read per email so a change applies to the next one (a primary-key lookup). */
export async function projectLanguage(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ language: projects.language }).from(projects).where(eq(projects.id, projectId));
  return row?.language ?? 'en';
}

/** Who sends the project's mail, for the MARKETING footer: its name and postal address (if set). */
export async function projectSender(ctx: AppContext, projectId: string): Promise<{ name: string; postalAddress: string | null }> {
  const [row] = await ctx.database.db.select({ name: projects.name, postalAddress: projects.postalAddress }).from(projects).where(eq(projects.id, projectId));
  return row ?? { name: '', postalAddress: null };
}

/** The project's IANA time zone (analytics buckets). */
export async function projectTimezone(ctx: AppContext, projectId: string): Promise<string> {
  const [row] = await ctx.database.db.select({ timezone: projects.timezone }).from(projects).where(eq(projects.id, projectId));
  return row?.timezone ?? 'UTC';
}
