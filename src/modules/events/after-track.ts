import type { AppContext } from '../../context.ts';
import type { Tx } from '../../db/client.ts';
import type { ContactRecord } from '../contacts/service.ts';
import { scheduleSegmentReevaluation } from '../segments/membership.ts';

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
 * Everything a tracked event causes, called by trackEvent inside its transaction after the event
 * row is written (a throw rolls the whole track back): the contact's tracked segments are
 * re-evaluated. Exported as an object so a test can observe or fail the step.
 */
async function eventTracked(ctx: AppContext, t: Tx, event: TrackedEvent): Promise<void> {
  await scheduleSegmentReevaluation(ctx, event.projectId, event.contact.id, t.client);
}

export const afterTrack = { eventTracked };
