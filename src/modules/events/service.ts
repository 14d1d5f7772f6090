import type { AppContext } from '../../context.ts';
import { type Tx, withTransaction } from '../../db/client.ts';
import { validationError } from '../../http/errors.ts';
import { splitCustomData } from '../contacts/custom-data.ts';
import { type ContactRecord, upsertContact } from '../contacts/service.ts';
import { isReservedEventName } from './names.ts';
import { recordEvent } from './record.ts';
import { reservedEventError, type TrackInput } from './schemas.ts';

/** A tracked event as the listeners see it, inside the transaction that recorded it. */
export type TrackedEvent = {
  id: string;
  projectId: string;
  name: string;
  contact: ContactRecord;
  isNewContact: boolean;
  /** The event's data: persistent and one-off values, unwrapped. */
  data: Record<string, unknown>;
  createdAt: Date;
};

/**
 * Called inside the transaction of every tracked event, after the event row is written: segments
 * (re-evaluation) and workflows (EVENT triggers, WAIT_FOR_EVENT) register here, one entry each.
 * A listener that throws rolls the whole track back.
 */
export type AfterTrackListener = (ctx: AppContext, t: Tx, event: TrackedEvent) => Promise<void>;

export const afterTrackListeners: AfterTrackListener[] = [];

export type TrackResult = { contact: ContactRecord; isNewContact: boolean; event: { id: string; createdAt: Date } };

/**
 * POST /v1/track and POST /events/track, in one transaction: upsert the contact (new contacts
 * subscribed unless `subscribed: false`; an existing one changes only with an explicit value,
 * emitting contact.subscribed/unsubscribed), record the event, run the after-track listeners.
 * Persistent data goes to the contact; the event keeps persistent and one-off values alike.
 */
export async function trackEvent(
  ctx: AppContext,
  projectId: string,
  input: TrackInput,
  opts: { now?: Date } = {},
): Promise<TrackResult> {
  const name = input.event.trim();
  if (isReservedEventName(name)) throw validationError([reservedEventError('event', name)]);
  const now = opts.now ?? ctx.clock.now();
  const { set, oneOff } = splitCustomData(input.data);
  const data = { ...set, ...oneOff };

  return withTransaction(ctx.database, async (t) => {
    const { contact, isNew } = await upsertContact(
      t.tx,
      projectId,
      { email: input.email, subscribed: input.subscribed, data: input.data },
      { defaultSubscribed: true, now },
    );
    const event = await recordEvent(t.tx, { projectId, contactId: contact.id, name, data, createdAt: now });
    const tracked: TrackedEvent = { id: event.id, projectId, name, contact, isNewContact: isNew, data, createdAt: event.createdAt };
    for (const listener of afterTrackListeners) await listener(ctx, t, tracked);
    return { contact, isNewContact: isNew, event };
  });
}
