import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { templates } from '../../db/schema/templates.ts';
import { fromDomainMatchesSql } from '../domains/sender.ts';

/** What templates hold, for the usage module (src/modules/usage). */

/** Domain DELETE is refused while a template sends from the domain or a subdomain of it. */
export async function templateUsingDomain(db: Db, projectId: string, domain: string): Promise<string | null> {
  const [row] = await db
    .select({ name: templates.name })
    .from(templates)
    .where(and(eq(templates.projectId, projectId), fromDomainMatchesSql(templates.fromEmail, domain)))
    .orderBy(asc(templates.createdAt))
    .limit(1);
  return row ? `template "${row.name}"` : null;
}
