import { inArray } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { emailContents } from '../../../db/schema/emails.ts';

export type StoredContent = typeof emailContents.$inferSelect;

/** The contents the claimed emails reference, each read once however many emails of the batch share it. */
export async function contentsOf(ctx: AppContext, emails: { contentId: string }[]): Promise<Map<string, StoredContent>> {
  const ids = [...new Set(emails.map((e) => e.contentId))];
  if (ids.length === 0) return new Map();
  const rows = await ctx.database.db.select().from(emailContents).where(inArray(emailContents.id, ids));
  return new Map(rows.map((r) => [r.id, r]));
}
