import * as base64 from 'nodemailer/lib/base64';
import type MimeNode from 'nodemailer/lib/mime-node';
import * as qp from 'nodemailer/lib/qp';

const LINE = 76;
/** nodemailer's QP encoder works in slices of this many bytes; larger parts are left to it. */
const QP_SLICE = 64 * 1024;

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
  const source = Buffer.concat(out.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : part)));
  // nodemailer's LastNewline: the source always ends with a line break.
  if (source.length > 0 && source[source.length - 1] === 0x0a) return source;
  return Buffer.concat([source, Buffer.from(source.length > 0 && source[source.length - 1] === 0x0d ? '\n' : '\r\n')]);
}

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
    const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    if (encoding === 'base64') out.push(base64.wrap(base64.encode(bytes), LINE));
    else if (encoding === 'quoted-printable') {
      const encoded = quotedPrintable(bytes);
      if (encoded === null) return false;
      out.push(encoded);
    } else out.push(bytes);
  }
  if (!node.multipart) return true;
  for (const [i, child] of node.childNodes.entries()) {
    out.push(`${i > 0 ? '\r\n' : ''}--${node.boundary}\r\n`);
    if (!writeNode(child, out)) return false;
  }
  out.push(`\r\n--${node.boundary}--\r\n`);
  return true;
}

/**
 * Quoted-printable as nodemailer's stream encoder writes it: the body without its trailing
 * whitespace is encoded and wrapped, then its last line is wrapped again together with that
 * whitespace (the encoder holds trailing whitespace back until it knows what follows).
 */
function quotedPrintable(bytes: Buffer): string | null {
  if (bytes.length > QP_SLICE) return null;
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x20 || bytes[end - 1] === 0x09)) end--;
  let done = '';
  let line = '';
  for (const slice of [bytes.subarray(0, end), bytes.subarray(end)]) {
    if (slice.length === 0) continue;
    const wrapped = qp.wrap(line + qp.encode(slice), LINE);
    const lastBreak = wrapped.lastIndexOf('\n');
    done += wrapped.slice(0, lastBreak + 1);
    line = wrapped.slice(lastBreak + 1);
  }
  return done + line;
}
