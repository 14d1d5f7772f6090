import { and, eq, inArray, lt, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { emails } from '../../../db/schema/emails.ts';

export type ClaimedEmail = typeof emails.$inferSelect;

const LEASE = sql`now() + interval '120 seconds'`;

/** Waiting for delivery: QUEUED, or SENDING by a worker whose lease expired (it died mid-send). */
const deliverable = or(eq(emails.status, 'QUEUED'), and(eq(emails.status, 'SENDING'), lt(emails.lockedUntil, sql`now()`)));

/** Of these emails, the ones still waiting for delivery, with their project; nothing is claimed. */
export async function peekEmails(ctx: AppContext, ids: string[]): Promise<{ id: string; projectId: string }[]> {
  if (ids.length === 0) return [];
  return ctx.database.db
    .select({ id: emails.id, projectId: emails.projectId })
    .from(emails)
    .where(and(inArray(emails.id, ids), deliverable));
}

/**
 * Check-and-set QUEUED → SENDING before any SMTP traffic: of two runs of the same job only one
 * gets a row, so a job that runs twice never delivers twice. One statement for the whole batch.
 */
export async function claimEmails(ctx: AppContext, ids: string[]): Promise<ClaimedEmail[]> {
  if (ids.length === 0) return [];
  return ctx.database.db
    .update(emails)
    .set({ status: 'SENDING', attempts: sql`${emails.attempts} + 1`, lockedUntil: LEASE, updatedAt: sql`now()` })
    .where(and(inArray(emails.id, ids), deliverable))
    .returning();
}
