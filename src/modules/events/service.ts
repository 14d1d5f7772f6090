import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { validationError } from '../../http/errors.ts';
import { splitCustomData } from '../contacts/custom-data.ts';
import { type ContactRecord, upsertContact } from '../contacts/service.ts';
import { afterTrack } from './after-track.ts';
import { isReservedEventName } from './names.ts';
import { recordEvent } from './record.ts';
import { reservedEventError, type TrackInput } from './schemas.ts';

export type TrackResult = { contact: ContactRecord; isNewContact: boolean; event: { id: string; createdAt: Date } };

/**
 * POST /v1/track and POST /events/track, in one transaction: upsert the contact (new contacts
 * subscribed unless `subscribed: false`; an existing one changes only with an explicit value,
 * emitting contact.subscribed/unsubscribed), record the event, then what it causes (afterTrack.eventTracked: segment re-evaluation).
 * Persistent data goes to the contact; the event keeps persistent and one-off values alike.
 * `opts.publicKey` (a browser's pk_ request) may subscribe only a new contact and may unsubscribe,
 * but never re-subscribes one who unsubscribed: `subscribed: true` then leaves it as it is.
 */
export async function trackEvent(ctx: AppContext, projectId: string, input: TrackInput, opts: { now?: Date; publicKey?: boolean } = {}): Promise<TrackResult> {
  const name = input.event.trim();
  if (isReservedEventName(name)) throw validationError([reservedEventError('event', name)]);
  const now = opts.now ?? ctx.clock.now();
  const { set, oneOff } = splitCustomData(input.data);
  const data = { ...set, ...oneOff };

  return withTransaction(ctx.database, async (t) => {
    const { contact, isNew } = await upsertContact(
      t.tx,
      projectId,
      // New contacts of /v1/track are subscribed by default, so "true" from a public key means
      // exactly "subscribe if new": an existing contact's choice stands.
      { email: input.email, subscribed: opts.publicKey && input.subscribed === true ? undefined : input.subscribed, data: input.data },
      { defaultSubscribed: true, now },
    );
    const event = await recordEvent(t.tx, { projectId, contactId: contact.id, name, data, createdAt: now });
    await afterTrack.eventTracked(ctx, t, { id: event.id, projectId, name, contact, isNewContact: isNew, data, createdAt: event.createdAt });
    return { contact, isNewContact: isNew, event };
  });
}
