import { z } from 'zod';
import { eventNameSchema } from '../events/schemas.ts';
import { isReservedEventName } from '../events/names.ts';

/** The `email.*` events the service emits (decisions.md § 5). */
export const EMITTED_EMAIL_EVENTS = [
  'email.sent',
  'email.delivered',
  'email.opened',
  'email.clicked',
  'email.bounced',
  'email.complained',
  'email.failed',
] as const;

const SEGMENT_EVENT = /^segment\.([a-z0-9_]+(?:-[a-z0-9_]+)*)\.(entry|exit)$/;

/**
 * Why an event name cannot trigger or resume a workflow, or null when it can. Any tracked name
 * works; a name in the service's reserved space works only when the service really emits it in
 * that exact form (`email.sent`, `contact.subscribed`, `segment.<slug>.entry`), since a workflow
 * waiting for `email.sendt` or `Segment.VIP.entry` would wait forever.
 */
export function eventNameProblem(name: string): string | null {
  if (!isReservedEventName(name)) return null;
  if ((EMITTED_EMAIL_EVENTS as readonly string[]).includes(name)) return null;
  if (name === 'contact.subscribed' || name === 'contact.unsubscribed') return null;
  if (SEGMENT_EVENT.test(name)) return null;
  return (
    `'${name}' is in the service's reserved event space but is never emitted: use a tracked event name, ` +
    `${EMITTED_EMAIL_EVENTS.join(', ')}, contact.subscribed, contact.unsubscribed or segment.<slug>.entry|exit ` +
    '(slug in lower case)'
  );
}

/** An event name a workflow can wait for or be triggered by. */
export const workflowEventName = eventNameSchema.superRefine((name, ctx) => {
  const problem = eventNameProblem(name);
  if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
});
