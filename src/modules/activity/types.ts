import { type SQL, sql } from 'drizzle-orm';

/**
 * Activity types and how each maps onto event names. Every email state change is recorded as an
 * `email.*` event by the delivery pipeline, and subscription changes as `contact.*` events, so the
 * feed is the events table read through this mapping. Custom tracked events are type `event`.
 */
export const EMAIL_TYPES = ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained', 'email.failed'] as const;

export const ACTIVITY_TYPES = [...EMAIL_TYPES, 'contact.subscribed', 'contact.unsubscribed', 'segment.entry', 'segment.exit', 'event'] as const;

export type ActivityType = (typeof ACTIVITY_TYPES)[number];

const SEGMENT = /^segment\..*\.(entry|exit)$/s;

/** The type of an event name. An `email.*` name the list does not know yet keeps its own name. */
export function activityTypeOf(name: string): string {
  if ((ACTIVITY_TYPES as readonly string[]).includes(name) && name !== 'event' && !name.startsWith('segment.')) return name;
  const segment = SEGMENT.exec(name);
  if (segment) return `segment.${segment[1]}`;
  if (name.startsWith('email.')) return name;
  return 'event';
}

/**
 * activityTypeOf in SQL, over a row aliased `e`: the exact names first, then the segment patterns
 * (`%` of LIKE spans any text, as `.*` with the `s` flag), then any other `email.*` name as itself.
 */
export const TYPE_OF_NAME = sql.raw(`CASE
  WHEN e.name IN (${ACTIVITY_TYPES.filter((t) => t !== 'event' && !t.startsWith('segment.'))
    .map((t) => `'${t}'`)
    .join(', ')}) THEN e.name
  WHEN e.name LIKE 'segment.%.entry' THEN 'segment.entry'
  WHEN e.name LIKE 'segment.%.exit' THEN 'segment.exit'
  WHEN e.name LIKE 'email.%' THEN e.name
  ELSE 'event' END`);

/**
 * The names Herald itself records (email.*, subscription changes, segment entries and exits), over
 * an events row aliased `e`, as text: also used inside the events insert's named statement
 * (analytics/rollups.ts). Every other name is a tracked (custom) event.
 */
export const SERVICE_EVENT_NAME_TEXT = `(e.name LIKE 'email.%' OR e.name IN ('contact.subscribed', 'contact.unsubscribed') OR e.name LIKE 'segment.%.entry' OR e.name LIKE 'segment.%.exit')`;

const NOT_CUSTOM = sql.raw(SERVICE_EVENT_NAME_TEXT);

/** SQL selecting the events of one type (events table alias `e`). */
export function typeCondition(type: ActivityType): SQL {
  switch (type) {
    case 'segment.entry':
      return sql`e.name LIKE 'segment.%.entry'`;
    case 'segment.exit':
      return sql`e.name LIKE 'segment.%.exit'`;
    case 'event':
      return sql`NOT ${NOT_CUSTOM}`;
    default:
      return sql`e.name = ${type}`;
  }
}
