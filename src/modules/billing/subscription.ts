/**
 * A project's Stripe subscription: which statuses give the plan, and which subscription events
 * may change what is stored (Stripe does not deliver events in order, and a customer may have held
 * more than one subscription).
 */

/** A subscription in these states is the project's plan (its caps bind, a new checkout is refused). */
export const LIVE_STATUSES = ['active', 'trialing', 'past_due'] as const;
/** A subscription in these states never changes again (Stripe cannot reactivate it). */
const ENDED_STATUSES = ['canceled', 'incomplete_expired'];

export const isLive = (status: string | null): boolean => status !== null && (LIVE_STATUSES as readonly string[]).includes(status);

export type StoredSubscription = { id: string | null; status: string | null; createdAt: Date | null; eventAt: Date | null };
export type SubscriptionEvent = { kind: 'created' | 'updated' | 'deleted'; id: string; createdAt: Date | null; at: Date };

/**
 * Whether a subscription event changes what the project stores:
 * - for the stored subscription, only an event newer than (or as old as) the last one applied, never
 *   once it ended, and never its `created` (the first event Stripe sends of a subscription: one
 *   already stored has had it or a later one; `created` and `updated` often share a second);
 * - for another subscription, only when the stored one is not live and the other is not older
 *   (a new subscription replaces a cancelled one; a late event of a replaced one changes nothing).
 */
export function supersedes(stored: StoredSubscription, event: SubscriptionEvent): boolean {
  if (stored.id === event.id) {
    if (stored.status !== null && ENDED_STATUSES.includes(stored.status)) return false;
    if (event.kind === 'created') return false;
    return stored.eventAt === null || event.at >= stored.eventAt;
  }
  if (stored.id === null) return true;
  if (isLive(stored.status)) return false;
  return stored.createdAt === null || event.createdAt === null || event.createdAt >= stored.createdAt;
}
