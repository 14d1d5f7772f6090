import { type MessageSpec, buildMessage } from '../mail/build-message.ts';
import { type UnsubscribeFooter, appendToBody, unsubscribeFooter } from '../mail/locales.ts';
import { applyTracking, type TrackingOptions } from '../mail/tracking.ts';
import { renderEmail } from './engine.ts';
import { plainText } from './plain-text.ts';

/** Everything of a message but its rendered parts: given, the thread also builds the MIME source. */
export type MessageEnvelope = Omit<MessageSpec, 'subject' | 'html' | 'text'>;

/** Everything CPU-bound about one message's content: render, footer, link tracking, plain text, and MIME. */
export type ComposeHtmlInput = {
  subject: string;
  body: string;
  vars: Record<string, unknown>;
  /** Appends the localized unsubscribe footer (MARKETING mail whose body does not place the link). */
  footer: UnsubscribeFooter | null;
  tracking: TrackingOptions | null;
  message?: MessageEnvelope;
};

/** `raw`: the unsigned RFC 5322 source, when the input had a `message`. */
export type ComposedHtml = { subject: string; html: string; text: string; raw?: Uint8Array };

/** Runs in a compose thread (compose-pool.ts); synchronous and free of I/O. */
export async function composeHtml(input: ComposeHtmlInput): Promise<ComposedHtml> {
  const rendered = await renderEmail({ subject: input.subject, body: input.body }, input.vars);
  let html = rendered.html;
  if (input.footer) html = appendToBody(html, unsubscribeFooter(input.footer));
  if (input.tracking) html = applyTracking(html, input.tracking);
  const text = plainText(html);
  if (!input.message) return { subject: rendered.subject, html, text };
  const raw = await buildMessage({ ...input.message, subject: rendered.subject, html, text });
  return { subject: rendered.subject, html, text, raw };
}
