/**
 * Event names the service emits itself (api-spec § Events emitted by the service). Clients cannot
 * track them: `email.*`, `contact.subscribed`, `contact.unsubscribed`, `segment.<slug>.entry|exit`.
 * Matched case-insensitively and after trimming, so `Email.Sent` cannot pass for a custom event.
 */
const RESERVED = [/^email\./, /^contact\.(un)?subscribed$/, /^segment\..*\.(entry|exit)$/s];

export function isReservedEventName(name: string): boolean {
  const n = name.trim().toLowerCase();
  return RESERVED.some((re) => re.test(n));
}

export const MAX_EVENT_NAME = 255;
