import { z } from 'zod';
import { type FieldError, fieldErrors, validationError } from '../../http/errors.ts';
import { component, envelope } from '../../http/openapi.ts';
import { limitParam } from '../../http/pagination.ts';
import { customDataSchema } from '../contacts/custom-data.ts';
import { isStorableText } from '../../db/storable-text.ts';
import { eventNameUsersSchema } from '../usage/schemas.ts';
import { emailSchema } from '../contacts/schemas.ts';
import { MAX_EVENT_NAME, isReservedEventName } from './names.ts';

/** An event as the API returns it. */
export type EventRecord = {
  id: string;
  name: string;
  contactId: string | null;
  contactEmail: string | null;
  data: Record<string, unknown>;
  createdAt: string;
};

const NO_CONTROL = /^[^\p{Cc}]*$/u;

/** A tracked event's name: trimmed, 1..255 characters, no control characters. Case is kept. */
export const eventNameSchema = z
  .string()
  .trim()
  .min(1, 'event must not be empty')
  .max(MAX_EVENT_NAME, `event must be at most ${MAX_EVENT_NAME} characters`)
  .refine((s) => NO_CONTROL.test(s) && isStorableText(s), 'event must not contain control characters');

export const trackBody = z
  .object({
    email: emailSchema,
    event: eventNameSchema,
    subscribed: z.boolean().optional(),
    data: customDataSchema.optional(),
  })
  .strict();

export type TrackInput = z.output<typeof trackBody>;

export const reservedEventError = (field: string, name: string): FieldError => ({
  field,
  code: 'reserved_event',
  message: `'${name}' is a reserved event name: email.*, contact.subscribed, contact.unsubscribed and segment.<slug>.entry|exit are emitted by the service`,
});

/** The /v1/track body: zod's field errors plus `reserved_event`, reported together in one 422. */
export function parseTrackBody(body: unknown): TrackInput {
  const result = trackBody.safeParse(body);
  const errors = result.success ? [] : fieldErrors(result.error);
  const event = typeof body === 'object' && body !== null && 'event' in body ? body.event : undefined;
  if (typeof event === 'string' && isReservedEventName(event) && !errors.some((e) => e.field === 'event')) {
    errors.push(reservedEventError('event', event.trim()));
  }
  if (errors.length > 0 || !result.success) throw validationError(errors);
  return result.data;
}

/** An event name in a path: as stored (tracked names are trimmed when recorded). */
export const eventNameParams = z.object({
  eventName: z
    .string()
    .min(1)
    .max(MAX_EVENT_NAME, `eventName must be at most ${MAX_EVENT_NAME} characters`)
    .refine(isStorableText, 'eventName must not contain NUL characters'),
});

export const contactIdParams = z.object({ contactId: z.string().min(1).max(100) });

const cursor = z.string().max(500).optional();

export const listEventsQuery = z.object({
  limit: limitParam,
  cursor,
  name: eventNameParams.shape.eventName.optional(),
  contactId: z.string().max(100).optional(),
});

export type ListEventsQuery = z.output<typeof listEventsQuery>;

export const contactEventsQuery = z.object({ limit: limitParam, cursor, name: listEventsQuery.shape.name });

// Responses (the document and the strict response check: src/http/openapi.ts)

export const eventSchema = component(
  'Event',
  z.object({
    id: z.string().describe('evt_<id>'),
    name: z.string(),
    contactId: z.string().nullable(),
    contactEmail: z.string().nullable(),
    data: z.record(z.unknown()),
    createdAt: z.string(),
  }),
);

export const trackResultSchema = envelope(
  z.object({ contact: z.string().describe('The contact id'), event: z.string().describe('The event id'), timestamp: z.string() }),
);

export const eventStatsSchema = z.object({
  from: z.string(),
  to: z.string(),
  total: z.number().int(),
  events: z.array(z.object({ name: z.string(), count: z.number().int(), uniqueContacts: z.number().int() })),
});

export const eventNamesSchema = z.object({
  names: z.array(z.object({ name: z.string(), reserved: z.boolean(), lastSeenAt: z.string() })),
  /** Present (true) when the project has more names than the first 1,000 listed. */
  truncated: z.literal(true).optional(),
});

export const eventUsageSchema = eventNameUsersSchema.extend({ eventCount: z.number().int(), canDelete: z.boolean() });
