import { eq } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { projects } from '../../db/schema/users.ts';

/** The project's display name, for pages a recipient sees; null when the project is gone. */
export async function projectName(db: Db, projectId: string): Promise<string | null> {
  const [row] = await db.select({ name: projects.name }).from(projects).where(eq(projects.id, projectId)).limit(1);
  return row?.name ?? null;
}
