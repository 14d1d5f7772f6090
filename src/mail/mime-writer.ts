import crypto from 'node:crypto';
import * as base64 from 'nodemailer/lib/base64';
import * as mimeFuncs from 'nodemailer/lib/mime-funcs';
import MimeNode from 'nodemailer/lib/mime-node';
import { quotedPrintable, textTransferEncoding } from './quoted-printable.ts';

const LINE = 76;

/**
 * Writes a MIME tree that MailComposer compiled into its RFC 5322 source in one synchronous pass:
 * the same headers (MimeNode.buildHeaders), encodings and boundaries as `MimeNode.build()`, which
 * streams every part through a pipeline of transform streams and costs several times more per
 * message. Returns null for a tree it does not write the same way (a raw node, content from a
 * stream, a file or a URL), which the caller then builds with nodemailer; a test holds the two
 * byte-for-byte equal.
 */
export function writeMimeTree(root: MimeNode): Buffer | null {
  const out: (string | Buffer)[] = [];
  if (!writeNode(root, out)) return null;
  return withFinalLineBreak(joined(out));
}

/** nodemailer's LastNewline: a source always ends with a line break (LF after a final CR, CRLF otherwise). */
export function withFinalLineBreak(source: Buffer): Buffer {
  const last = source[source.length - 1];
  if (last === 0x0a) return source;
  return Buffer.concat([source, Buffer.from(last === 0x0d ? '\n' : '\r\n')]);
}

/** The written pieces as one source: headers and encoded text are ASCII, raw parts stay bytes. */
const joined = (out: (string | Buffer)[]) => Buffer.concat(out.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : part)));

function writeNode(node: MimeNode, out: (string | Buffer)[]): boolean {
  if ((node as unknown as { _raw?: unknown })._raw) return false;
  const content = node.content;
  if (content !== undefined && content !== null && content !== '' && typeof content !== 'string' && !Buffer.isBuffer(content)) return false;
  const encoding = node.getTransferEncoding();
  // Quoted-printable outside text/* treats a lone CR or LF as data, which only the stream encoder does.
  if (encoding === 'quoted-printable' && !/^text\//i.test(String(node.getHeader('Content-Type') ?? ''))) return false;
  // buildHeaders emits the header block as one string of ASCII (non-ASCII is MIME-encoded).
  out.push(node.buildHeaders() + '\r\n\r\n');
  if (content) {
    const body = encodedBody(typeof content === 'string' ? Buffer.from(content, 'utf8') : content, encoding);
    if (body === null) return false;
    out.push(body);
  }
  if (!node.multipart) return true;
  for (const [i, child] of node.childNodes.entries()) {
    out.push(`${i > 0 ? '\r\n' : ''}--${node.boundary}\r\n`);
    if (!writeNode(child, out)) return false;
  }
  out.push(`\r\n--${node.boundary}--\r\n`);
  return true;
}

/** A part's content in its transfer encoding, as nodemailer's stream encoders write it; null where only they can. */
function encodedBody(bytes: Buffer, encoding: string | false): string | Buffer | null {
  if (encoding === 'base64') return base64.wrap(base64.encode(bytes), LINE);
  if (encoding === 'quoted-printable') return quotedPrintable(bytes);
  return bytes;
}

/** nodemailer's own header encoding (addresses, encoded words, message ids, key case), from a node that holds no message. */
const encoder = new MimeNode() as MimeNode & {
  encodeHeaderValue(key: string, value: unknown): string;
  _normalizeHeaderKey(key: string): string;
};

/** Fields MailComposer sets, replaces, drops or moves itself: a custom header of one of these leaves the message to it. */
const COMPOSED_FIELDS = new Set([
  'From',
  'Sender',
  'To',
  'Cc',
  'Bcc',
  'Reply-To',
  'In-Reply-To',
  'References',
  'Subject',
  'Message-ID',
  'Date',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'Content-Disposition',
  'OTP-Token',
]);

/** Random bytes for boundaries, drawn 4 KB at a time: a call to randomBytes cost 13 µs in the compose thread. */
let boundaryBytes = Buffer.alloc(0);
let boundaryBytesUsed = 0;

/** 16 random hex digits, as MailComposer's boundaries have. */
function randomBoundary(): string {
  if (boundaryBytesUsed + 8 > boundaryBytes.length) {
    boundaryBytes = crypto.randomBytes(4096);
    boundaryBytesUsed = 0;
  }
  boundaryBytesUsed += 8;
  return boundaryBytes.toString('hex', boundaryBytesUsed - 8, boundaryBytesUsed);
}

type MailAddress = string | { name: string; address: string };

/** The common message: an HTML part and its text alternative, no attachments. */
export type AlternativeMessage = {
  messageId: string;
  date: Date;
  from: MailAddress;
  to: MailAddress;
  replyTo?: string;
  subject: string;
  html: string;
  text: string;
  headers: Record<string, string>;
};

/**
 * The source MailComposer would build for a text and HTML message without attachments, written
 * directly: compiling the MIME tree and building its headers cost about four times the rest of
 * writing such a message. Every header goes through nodemailer's own encoder and folding, the parts
 * through its transfer encodings. Null for what it does not write the same way (an empty part, a
 * custom header MailComposer would treat specially, a part over 64 KB of quoted-printable), which
 * the caller then gives to MailComposer; a test holds the two byte-for-byte equal.
 */
export function writeAlternativeMessage(message: AlternativeMessage, baseBoundary = randomBoundary()): Buffer | null {
  if (!message.text || !message.html) return null;
  const fields: [string, unknown][] = [];
  for (const [name, value] of Object.entries(message.headers)) {
    const key = encoder._normalizeHeaderKey(name);
    if (!key || COMPOSED_FIELDS.has(key)) return null;
    fields.push([key, value]);
  }
  const boundary = `--_NmP-${baseBoundary}-Part_1`;
  // MailComposer's order: custom headers, then its own (those with a value), then MIME-Version and Content-Type last.
  fields.push(['From', message.from], ['To', message.to]);
  if (message.replyTo) fields.push(['Reply-To', message.replyTo]);
  if (message.subject) fields.push(['Subject', message.subject]);
  fields.push(
    ['Message-ID', message.messageId],
    ['Date', message.date],
    ['MIME-Version', '1.0'],
    ['Content-Type', mimeFuncs.buildHeaderValue({ value: 'multipart/alternative', params: { boundary } })],
  );
  const header: string[] = [];
  for (const [key, value] of fields) {
    const encoded = encoder.encodeHeaderValue(key, value);
    if (encoded.trim()) header.push(mimeFuncs.foldLines(`${key}: ${encoded}`, LINE));
  }
  const out: (string | Buffer)[] = [`${header.join('\r\n')}\r\n\r\n`];
  for (const [i, [type, content]] of [
    ['text/plain; charset=utf-8', message.text],
    ['text/html; charset=utf-8', message.html],
  ].entries()) {
    const bytes = Buffer.from(content, 'utf8');
    const encoding = textTransferEncoding(bytes);
    const body = encodedBody(bytes, encoding);
    if (body === null) return null;
    out.push(`${i > 0 ? '\r\n' : ''}--${boundary}\r\nContent-Type: ${type}\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n`, body);
  }
  out.push(`\r\n--${boundary}--\r\n`);
  return joined(out);
}
