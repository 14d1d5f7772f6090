import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { scheduleSegmentReevaluation } from '../segments/membership.ts';
import type { CreateContactInput } from './schemas.ts';
import { type UpsertResult, upsertContact } from './service.ts';
import { upsertContacts } from './upsert-many.ts';

/**
 * POST /contacts. Concurrent requests of one project are written together (routes.ts, the write
 * groups of db/write-groups.ts): `saveContacts` for a group, `saveContact` for a request alone. Both
 * upsert by email with the same rules (an existing contact changes subscription only by an explicit
 * value, emitting contact.subscribed/unsubscribed), then queue the re-evaluation of tracked segments
 * for each contact written, after the commit.
 */

/** `dataBytes`: the JSON bytes of the input's data (its share of a write group). */
export type ContactSave = { projectId: string; input: CreateContactInput; dataBytes: number };

export async function saveContact(ctx: AppContext, { projectId, input }: ContactSave): Promise<UpsertResult> {
  const opts = { defaultSubscribed: true, now: ctx.clock.now() };
  // Only an explicit `subscribed` can change an existing contact's state, and so write an event.
  const result =
    input.subscribed === undefined
      ? await upsertContact(ctx.database.db, projectId, input, opts)
      : await withTransaction(ctx.database, ({ tx }) => upsertContact(tx, projectId, input, opts));
  if (result.isNew || result.isUpdate) await scheduleSegmentReevaluation(ctx, projectId, result.contact.id);
  return result;
}

/** Saves of distinct emails of one project in one transaction: one upsert statement (upsert-many.ts), and the subscription events in one more. */
export async function saveContacts(ctx: AppContext, projectId: string, saves: ContactSave[]): Promise<UpsertResult[]> {
  const now = ctx.clock.now();
  const results = await withTransaction(ctx.database, ({ tx }) =>
    upsertContacts(
      tx,
      projectId,
      saves.map((s) => ({ ...s.input, now })),
      { defaultSubscribed: true },
    ),
  );
  for (const r of results) if (r.isNew || r.isUpdate) await scheduleSegmentReevaluation(ctx, projectId, r.contact.id);
  return results;
}
