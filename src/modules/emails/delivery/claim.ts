import { and, eq, lt, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { emails } from '../../../db/schema/emails.ts';

export type ClaimedEmail = typeof emails.$inferSelect;

const LEASE = sql`now() + interval '120 seconds'`;

/** Waiting for delivery: QUEUED, or SENDING by a worker whose lease expired (it died mid-send). */
const deliverable = or(eq(emails.status, 'QUEUED'), and(eq(emails.status, 'SENDING'), lt(emails.lockedUntil, sql`now()`)));

/** The email's project if it still waits for delivery, without claiming it. */
export async function peekEmail(ctx: AppContext, emailId: string): Promise<{ projectId: string } | null> {
  const [row] = await ctx.database.db
    .select({ projectId: emails.projectId })
    .from(emails)
    .where(and(eq(emails.id, emailId), deliverable));
  return row ?? null;
}

/**
 * Check-and-set QUEUED → SENDING before any SMTP traffic: of two runs of the same job only one
 * gets the row, so a job that runs twice never delivers twice.
 */
export async function claimEmail(ctx: AppContext, emailId: string): Promise<ClaimedEmail | null> {
  const [row] = await ctx.database.db
    .update(emails)
    .set({ status: 'SENDING', attempts: sql`${emails.attempts} + 1`, lockedUntil: LEASE, updatedAt: sql`now()` })
    .where(and(eq(emails.id, emailId), deliverable))
    .returning();
  return row ?? null;
}
