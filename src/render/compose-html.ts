import { type MessageSpec, buildMessage } from '../mail/build-message.ts';
import { type DkimKey, signMessage } from '../mail/dkim-sign.ts';
import { type UnsubscribeFooter, appendToBody, unsubscribeFooter } from '../mail/locales.ts';
import { applyTrackingAndBound, type TrackingOptions } from '../mail/tracking.ts';
import { renderEmail } from './engine.ts';
import { plainText, plainTextOfBounded } from './plain-text.ts';

/** Everything of a message but its rendered parts: given, the thread also builds the MIME source. */
export type MessageEnvelope = Omit<MessageSpec, 'subject' | 'html' | 'text'>;

/** Everything CPU-bound about one message: render, footer, link tracking, plain text, MIME and the DKIM signature. */
export type ComposeHtmlInput = {
  subject: string;
  body: string;
  vars: Record<string, unknown>;
  /** Appends the localized unsubscribe footer (MARKETING mail whose body does not place the link). */
  footer: UnsubscribeFooter | null;
  tracking: TrackingOptions | null;
  message?: MessageEnvelope;
  /** With `message`: the source is signed with this key (its DKIM-Signature header prepended). */
  dkim?: DkimKey;
};

/** The rendered parts, for an input without a `message`. */
export type ComposedHtml = { subject: string; html: string; text: string };
/**
 * For an input with a `message`: the RFC 5322 source (signed when it had a `dkim` key). Its parts
 * stay in the thread: the event loop would only copy them out of the message and drop them.
 */
export type ComposedSource = { subject: string; raw: Uint8Array };

export type ComposeMessageInput = ComposeHtmlInput & { message: MessageEnvelope };
export type ComposePartsInput = ComposeHtmlInput & { message?: undefined };

/** Runs in a compose thread (compose-pool.ts); synchronous and free of I/O. */
export async function composeHtml(input: ComposeMessageInput): Promise<ComposedSource>;
export async function composeHtml(input: ComposePartsInput): Promise<ComposedHtml>;
export async function composeHtml(input: ComposeHtmlInput): Promise<ComposedHtml | ComposedSource>;
export async function composeHtml(input: ComposeHtmlInput): Promise<ComposedHtml | ComposedSource> {
  const rendered = await renderEmail({ subject: input.subject, body: input.body }, input.vars);
  let html = rendered.html;
  if (input.footer) html = appendToBody(html, unsubscribeFooter(input.footer));
  let text: string;
  if (input.tracking) {
    const tracked = applyTrackingAndBound(html, input.tracking);
    html = tracked.html;
    text = plainTextOfBounded(tracked.bounded);
  } else {
    text = plainText(html);
  }
  if (!input.message) return { subject: rendered.subject, html, text };
  const unsigned = await buildMessage({ ...input.message, subject: rendered.subject, html, text });
  const raw = input.dkim ? await signMessage(unsigned, input.dkim) : unsigned;
  return { subject: rendered.subject, raw };
}
