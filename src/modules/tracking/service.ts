import { and, eq, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { UUID } from '../../db/ids.ts';
import { emails } from '../../db/schema/emails.ts';
import { emailEventData } from '../emails/delivery/record.ts';
import { recordEvent } from '../events/record.ts';

/**
 * Opens and clicks, from the pixel and link redirects or from SES Open/Click notifications. Each
 * one counts: `openCount`/`clickCount` go up and an `email.opened`/`email.clicked` event is
 * recorded; `openedAt`/`clickedAt` keep the first time. A click also counts as the first open
 * when none was seen (the pixel is often blocked), as most ESPs do.
 */

/** Records one open. False when the email does not exist (any more). */
export async function recordOpen(ctx: AppContext, emailId: string, at: Date = ctx.clock.now()): Promise<boolean> {
  if (!UUID.test(emailId)) return false;
  return withTransaction(ctx.database, async ({ tx }) => {
    const [row] = await tx
      .update(emails)
      .set({ openCount: sql`${emails.openCount} + 1`, openedAt: sql`coalesce(${emails.openedAt}, ${at.toISOString()}::timestamptz)` })
      .where(eq(emails.id, emailId))
      .returning();
    if (!row) return false;
    if (row.contactId) {
      await recordEvent(tx, { projectId: row.projectId, contactId: row.contactId, name: 'email.opened', data: emailEventData(row, null), createdAt: at });
    }
    return true;
  });
}

/** Records one click on `link`. False when the email does not exist (any more). */
export async function recordClick(ctx: AppContext, emailId: string, link: string, at: Date = ctx.clock.now()): Promise<boolean> {
  if (!UUID.test(emailId)) return false;
  return withTransaction(ctx.database, async ({ tx }) => {
    const firstOpen = await tx
      .update(emails)
      .set({ openedAt: at, openCount: sql`greatest(${emails.openCount}, 1)` })
      .where(and(eq(emails.id, emailId), isNull(emails.openedAt)))
      .returning({ id: emails.id });
    const [row] = await tx
      .update(emails)
      .set({ clickCount: sql`${emails.clickCount} + 1`, clickedAt: sql`coalesce(${emails.clickedAt}, ${at.toISOString()}::timestamptz)` })
      .where(eq(emails.id, emailId))
      .returning();
    if (!row) return false;
    if (row.contactId) {
      const base = { projectId: row.projectId, contactId: row.contactId, createdAt: at };
      if (firstOpen.length > 0) await recordEvent(tx, { ...base, name: 'email.opened', data: emailEventData(row, null) });
      await recordEvent(tx, { ...base, name: 'email.clicked', data: emailEventData(row, null, { link }) });
    }
    return true;
  });
}
