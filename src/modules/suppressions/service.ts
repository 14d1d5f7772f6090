import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { suppressions } from '../../db/schema/emails.ts';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

export async function isSuppressed(db: Db, projectId: string, email: string): Promise<boolean> {
  const rows = await db
    .select({ one: sql`1` })
    .from(suppressions)
    .where(and(eq(suppressions.projectId, projectId), eq(suppressions.email, email.toLowerCase())))
    .limit(1);
  return rows.length > 0;
}

/** Suppresses an address in the project; the first reason recorded is kept. */
export async function suppressAddress(
  db: Db,
  projectId: string,
  email: string,
  reason: SuppressionReason,
  emailId: string | null,
  now: Date,
): Promise<void> {
  await db
    .insert(suppressions)
    .values({ projectId, email: email.toLowerCase(), reason, emailId, createdAt: now })
    .onConflictDoNothing();
}
