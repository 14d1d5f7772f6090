import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { UUID } from '../../db/ids.ts';
import { emails } from '../../db/schema/emails.ts';

/**
 * Opens and clicks, from the pixel and link redirects or from SES Open/Click notifications. Each
 * one counts: `openCount`/`clickCount` go up and an `email.opened`/`email.clicked` event is
 * recorded; `openedAt`/`clickedAt` keep the first time. A click also counts as the first open
 * when none was seen (the pixel is often blocked), as most ESPs do.
 */

/** Records one open (with the email's other opens arriving meanwhile: ctx.recordEngagement). False when the email does not exist (any more). */
export async function recordOpen(ctx: AppContext, emailId: string, at: Date = ctx.clock.now()): Promise<boolean> {
  if (!UUID.test(emailId)) return false;
  return ctx.recordEngagement.open(emailId, at);
}

/** Records one click on `link`. False when the email does not exist (any more). */
export async function recordClick(ctx: AppContext, emailId: string, link: string, at: Date = ctx.clock.now()): Promise<boolean> {
  if (!UUID.test(emailId)) return false;
  return ctx.recordEngagement.click(emailId, link, at);
}

/** When an email was created; null when it does not exist (any more). For tracking tokens that carry no time. */
export async function emailCreatedAt(ctx: AppContext, emailId: string): Promise<Date | null> {
  if (!UUID.test(emailId)) return null;
  const [row] = await ctx.database.db.select({ createdAt: emails.createdAt }).from(emails).where(eq(emails.id, emailId));
  return row?.createdAt ?? null;
}
