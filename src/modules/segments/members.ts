import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import type { segments } from '../../db/schema/segments.ts';
import { badRequest, notFound } from '../../http/errors.ts';
import { normaliseEmail } from '../contacts/schemas.ts';
import { upsertContacts } from '../contacts/upsert-many.ts';
import { textArray } from '../contacts/sql.ts';
import { recordMembershipEvents, scheduleSegmentReevaluation } from './membership.ts';
import type { AddMembersInput } from './schemas.ts';
import { countStaticMembers, findSegmentRow, storeMemberCount } from './service.ts';

/** The member list of STATIC segments (decisions.md § 6): POST and DELETE /segments/:id/members. */

type SegmentRow = typeof segments.$inferSelect;

async function staticSegment(db: Db, projectId: string, id: string): Promise<SegmentRow> {
  const row = await findSegmentRow(db, projectId, id, { lock: true });
  if (!row) throw notFound('segment', id);
  if (row.type !== 'STATIC') throw badRequest('Members can only be managed on a STATIC segment', { segmentId: row.id, type: row.type });
  return row;
}

async function recount(db: Db, segmentId: string, now: Date): Promise<void> {
  await storeMemberCount(db, segmentId, await countStaticMembers(db, segmentId), now);
}

/**
 * Adds contacts by email. Unknown emails are created when `createMissing` (subscribed per
 * `subscribed`, default true; existing contacts keep their state) and reported in `notFound`
 * otherwise. `added` counts contacts that were not members yet. A tracked segment emits entries.
 */
export async function addMembers(
  ctx: AppContext,
  projectId: string,
  id: string,
  input: AddMembersInput,
): Promise<{ added: number; created: number; notFound: string[] }> {
  const emails = [...new Set(input.emails.map(normaliseEmail))];
  const now = ctx.clock.now();
  return withTransaction(ctx.database, async ({ tx, client }) => {
    const row = await staticSegment(tx, projectId, id);
    const { rows: existing } = await tx.execute<{ id: string; email: string }>(
      sql`SELECT id, email FROM contacts WHERE project_id = ${projectId} AND email = ANY(${textArray(emails)})`,
    );
    const ids = new Map(existing.map((r) => [r.email, r.id]));
    const missing = emails.filter((e) => !ids.has(e));
    let created = 0;
    if (input.createMissing && missing.length > 0) {
      // One statement for all of them, in the lock order every multi-contact upsert takes (upsert-many.ts).
      const results = await upsertContacts(
        tx,
        projectId,
        missing.map((email) => ({ email, subscribed: input.subscribed, now })),
        { defaultSubscribed: true },
      );
      for (const [i, result] of results.entries()) {
        ids.set(missing[i], result.contact.id);
        if (result.isNew) {
          created += 1;
          await scheduleSegmentReevaluation(ctx, projectId, result.contact.id, client);
        }
      }
    }
    const { rows: added } = await tx.execute<{ contact_id: string }>(sql`
      INSERT INTO segment_members (segment_id, contact_id, created_at)
      SELECT ${row.id}::uuid, u.id, ${now.toISOString()}::timestamptz FROM unnest(${textArray([...ids.values()])}) AS u(id)
      ON CONFLICT DO NOTHING
      RETURNING contact_id`);
    if (row.trackMembership) await recordMembershipEvents(tx, row, { entered: added.map((r) => r.contact_id), exited: [] }, now);
    await recount(tx, row.id, now);
    return { added: added.length, created, notFound: input.createMissing ? [] : missing };
  });
}

/** Removes contacts by email; `removed` counts the ones that were members. A tracked segment emits exits. */
export async function removeMembers(ctx: AppContext, projectId: string, id: string, emails: string[]): Promise<{ removed: number }> {
  const wanted = [...new Set(emails.map(normaliseEmail))];
  const now = ctx.clock.now();
  return withTransaction(ctx.database, async ({ tx }) => {
    const row = await staticSegment(tx, projectId, id);
    const { rows: removed } = await tx.execute<{ contact_id: string }>(sql`
      DELETE FROM segment_members AS m
       USING contacts AS c
       WHERE m.segment_id = ${row.id}::uuid AND m.contact_id = c.id
         AND c.project_id = ${projectId} AND c.email = ANY(${textArray(wanted)})
      RETURNING m.contact_id`);
    if (row.trackMembership) await recordMembershipEvents(tx, row, { entered: [], exited: removed.map((r) => r.contact_id) }, now);
    await recount(tx, row.id, now);
    return { removed: removed.length };
  });
}
