import type { AppContext } from '../../context.ts';
import { type Tx, withTransaction } from '../../db/client.ts';
import { LEFT_OUT } from '../../db/write-groups.ts';
import { validationError } from '../../http/errors.ts';
import { dataBytes, splitCustomData } from '../contacts/custom-data.ts';
import { normaliseEmail } from '../contacts/schemas.ts';
import { type ContactRecord, type UpsertInput, type UpsertResult, upsertContact } from '../contacts/service.ts';
import { upsertContacts } from '../contacts/upsert-many.ts';
import { afterTrack } from './after-track.ts';
import { isReservedEventName } from './names.ts';
import { recordEvent, recordEvents } from './record.ts';
import { reservedEventError, type TrackInput } from './schemas.ts';
import { trackInOneStatement } from './track-statement.ts';

export type TrackResult = { contact: ContactRecord; isNewContact: boolean; event: { id: string; createdAt: Date } };

/** A track request checked and resolved to what it writes, before any transaction. */
/** `dataBytes`: the JSON bytes of the request's data (its share of a write group). */
export type PreparedTrack = { projectId: string; name: string; data: Record<string, unknown>; dataBytes: number; upsert: UpsertInput; now: Date };

/**
 * Checks a /v1/track or /events/track body and fixes what it writes. New contacts of /v1/track are
 * subscribed by default, so "true" from a public key (a browser's pk_ request) means exactly
 * "subscribe if new": an existing contact's choice stands, and a public key never re-subscribes one
 * who unsubscribed. It may unsubscribe.
 */
export function prepareTrack(ctx: AppContext, projectId: string, input: TrackInput, opts: { now?: Date; publicKey?: boolean } = {}): PreparedTrack {
  const name = input.event.trim();
  if (isReservedEventName(name)) throw validationError([reservedEventError('event', name)]);
  const { set, oneOff } = splitCustomData(input.data);
  return {
    projectId,
    name,
    data: { ...set, ...oneOff },
    dataBytes: dataBytes(input.data),
    upsert: { email: input.email, subscribed: opts.publicKey && input.subscribed === true ? undefined : input.subscribed, data: input.data },
    now: opts.now ?? ctx.clock.now(),
  };
}

/** Two tracks of one contact never share a group (one statement cannot write a row twice). */
export const trackContactKeys = (t: PreparedTrack): string[] => [normaliseEmail(t.upsert.email)];

/**
 * POST /v1/track and POST /events/track, in one transaction: upsert the contact (new contacts
 * subscribed unless `subscribed: false`; an existing one changes only with an explicit value,
 * emitting contact.subscribed/unsubscribed), record the event, then what it causes
 * (afterTrack.eventTracked: segment re-evaluation). Persistent data goes to the contact; the event
 * keeps persistent and one-off values alike. When afterTrack adds nothing for the project (it has
 * no tracked segment), the same writes are one statement (track-statement.ts): one round trip.
 */
export async function trackEvent(ctx: AppContext, projectId: string, input: TrackInput, opts: { now?: Date; publicKey?: boolean } = {}): Promise<TrackResult> {
  return trackPrepared(ctx, prepareTrack(ctx, projectId, input, opts));
}

export async function trackPrepared(ctx: AppContext, track: PreparedTrack): Promise<TrackResult> {
  if (!(await afterTrack.hasEffects(ctx, track.projectId))) {
    const [result] = await trackInOneStatement(ctx, track.projectId, [track]);
    if (result) return result;
  }
  return withTransaction(ctx.database, async (t) => {
    const upserted = await upsertContact(t.tx, track.projectId, track.upsert, { defaultSubscribed: true, now: track.now });
    const event = await recordEvent(t.tx, {
      projectId: track.projectId,
      contactId: upserted.contact.id,
      name: track.name,
      data: track.data,
      createdAt: track.now,
    });
    await tracked(ctx, t, track, upserted, event.id);
    return { contact: upserted.contact, isNewContact: upserted.isNew, event };
  });
}

/**
 * Many tracks of one project (distinct contacts) in one transaction, with the same effects as
 * `trackPrepared` for each: one statement upserts the contacts, one records the events. When
 * afterTrack adds nothing, they are one statement instead, which may leave a track out (LEFT_OUT).
 */
export async function trackMany(ctx: AppContext, projectId: string, tracks: PreparedTrack[]): Promise<(TrackResult | typeof LEFT_OUT)[]> {
  if (!(await afterTrack.hasEffects(ctx, projectId))) return (await trackInOneStatement(ctx, projectId, tracks)).map((r) => r ?? LEFT_OUT);
  return withTransaction(ctx.database, async (t) => {
    const upserted = await upsertContacts(
      t.tx,
      projectId,
      tracks.map((k) => ({ ...k.upsert, now: k.now })),
      { defaultSubscribed: true },
    );
    const events = await recordEvents(
      t.tx,
      tracks.map((k, i) => ({ projectId, contactId: upserted[i].contact.id, name: k.name, data: k.data, createdAt: k.now })),
    );
    for (const [i, k] of tracks.entries()) await tracked(ctx, t, k, upserted[i], events[i].id);
    return tracks.map((k, i) => ({ contact: upserted[i].contact, isNewContact: upserted[i].isNew, event: { id: events[i].id, createdAt: k.now } }));
  });
}

const tracked = (ctx: AppContext, t: Tx, track: PreparedTrack, upserted: UpsertResult, eventId: string) =>
  afterTrack.eventTracked(ctx, t, {
    id: eventId,
    projectId: track.projectId,
    name: track.name,
    contact: upserted.contact,
    isNewContact: upserted.isNew,
    data: track.data,
    createdAt: track.now,
  });
