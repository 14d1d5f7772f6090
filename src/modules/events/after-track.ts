import type { AppContext } from '../../context.ts';
import type { Tx } from '../../db/client.ts';
import type { ContactRecord } from '../contacts/service.ts';
import { hasTrackedSegments, scheduleSegmentReevaluation } from '../segments/membership.ts';

/** A tracked event, inside the transaction that recorded it. */
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
 * Everything a tracked event causes beyond its statement, called by trackEvent inside its
 * transaction after the event row is written (a throw rolls the whole track back): the contact's
 * tracked segments are re-evaluated. Exported as an object so a test can observe or fail the step.
 */
async function eventTracked(ctx: AppContext, t: Tx, event: TrackedEvent): Promise<void> {
  await scheduleSegmentReevaluation(ctx, event.projectId, event.contact.id, t.client);
}

/** Whether eventTracked does anything for the project's tracks; when it does not, a track needs no transaction (events/service.ts). */
async function hasEffects(ctx: AppContext, projectId: string): Promise<boolean> {
  return hasTrackedSegments(ctx, projectId);
}

export const afterTrack = { eventTracked, hasEffects };
