import { eq, getTableColumns, sql } from 'drizzle-orm';
import { equalsAny } from '../../../db/any.ts';
import type { AppContext } from '../../../context.ts';
import { emailContents } from '../../../db/schema/emails.ts';

export type StoredContent = typeof emailContents.$inferSelect;

/**
 * Attachments whose stored JSON is larger than this are not read with the batch: a batch of 100
 * emails with 10 MB of attachments each would be 1.3 GB in one result. Their emails are sent one
 * at a time, each reading its content just before (`fullContent`).
 */
export const HEAVY_ATTACHMENTS_BYTES = 256 * 1024;

/** A content as read for a batch: when `heavy`, `attachments` was left out (null) and must be read with `fullContent`. */
export type BatchContent = StoredContent & { heavy: boolean };

/** The contents the claimed emails reference, each read once however many emails of the batch share it. */
export async function contentsOf(ctx: AppContext, emails: { contentId: string }[]): Promise<Map<string, BatchContent>> {
  const ids = [...new Set(emails.map((e) => e.contentId))];
  if (ids.length === 0) return new Map();
  const heavy = sql<boolean>`coalesce(octet_length(${emailContents.attachments}::text) > ${HEAVY_ATTACHMENTS_BYTES}, false)`;
  const rows = await ctx.database.db
    .select({
      ...getTableColumns(emailContents),
      attachments: sql<StoredContent['attachments']>`CASE WHEN NOT ${heavy} THEN ${emailContents.attachments} END`,
      heavy,
    })
    .from(emailContents)
    .where(equalsAny(emailContents.id, ids, 'uuid'));
  return new Map(rows.map((r) => [r.id, r]));
}

/** One content with its attachments, however large (for a `heavy` one). */
export async function fullContent(ctx: AppContext, id: string): Promise<StoredContent> {
  const [row] = await ctx.database.db.select().from(emailContents).where(eq(emailContents.id, id));
  if (!row) throw new Error(`email content ${id} is gone`);
  return row;
}
