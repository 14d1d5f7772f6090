import MailComposer from 'nodemailer/lib/mail-composer';
import * as mimeFuncs from 'nodemailer/lib/mime-funcs';
import type { StoredAttachment } from '../db/schema/emails.ts';
import { plainText } from '../render/plain-text.ts';
import { writeAlternativeMessage, writeMimeTree } from './mime-writer.ts';

/** The one HTML-to-text converter (also used by the template preview). */
export { plainText };

export type Address = { email: string; name?: string | null };

export type MessageSpec = {
  messageId: string;
  from: Address;
  to: Address;
  replyTo?: string | null;
  subject: string;
  html: string;
  /** The plain-text alternative when the caller made it; otherwise generated from `html`. */
  text?: string;
  headers: Record<string, string>;
  attachments?: StoredAttachment[] | null;
  date: Date;
};

const formatAddress = (a: Address) => (a.name ? { name: a.name, address: a.email } : a.email);

/** RFC 5322 § 2.1.1: a line is at most 998 characters before its CRLF. */
const MAX_LINE = 998;

/**
 * A custom header value as written: as given, unless a run of it without whitespace (where
 * folding cannot break it) would make a line over MAX_LINE; then as RFC 2047 encoded words,
 * which fold between them and which readers decode back to the value. A 998-character value
 * (the spec's maximum) without spaces made a 999-character line after the fold.
 */
export function foldableHeaderValue(name: string, value: string): string {
  const runs = value.split(/[ \t]+/);
  const longest = runs.reduce((max, run) => Math.max(max, run.length), 0);
  if (longest + name.length + 2 <= MAX_LINE) return value;
  return mimeFuncs.encodeWord(value, 'B', 52);
}

/** The RFC 5322 source: HTML plus its generated plain-text alternative, headers and attachments. */
export async function buildMessage(spec: MessageSpec): Promise<Buffer> {
  const message = {
    messageId: spec.messageId,
    date: spec.date,
    from: formatAddress(spec.from),
    to: formatAddress(spec.to),
    replyTo: spec.replyTo ?? undefined,
    subject: spec.subject,
    html: spec.html,
    text: spec.text ?? plainText(spec.html),
    headers: Object.fromEntries(Object.entries(spec.headers).map(([name, value]) => [name, foldableHeaderValue(name, value)])),
  };
  const lean = spec.attachments?.length ? null : writeAlternativeMessage(message);
  if (lean) return lean;
  const composer = new MailComposer({
    ...message,
    attachments: (spec.attachments ?? []).map((a) => ({
      filename: a.filename,
      content: a.content,
      encoding: 'base64',
      contentType: a.contentType,
      cid: a.contentId,
      contentDisposition: a.disposition ?? (a.contentId ? 'inline' : 'attachment'),
    })),
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const tree = composer.compile();
  return writeMimeTree(tree) ?? tree.build();
}
