import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import { Tokenizer } from 'htmlparser2';
import { appendToBody } from './locales.ts';
import { perSecret } from '../tokens/per-secret.ts';
import { type Alongside, type Edit, MAX_NESTING, MAX_WORD, applyEdits, boundNesting, boundingEdits } from '../render/plain-text.ts';

/**
 * Open and click tracking of outgoing HTML: links become `${publicUrl}/t/c/<token>` and a 1×1
 * pixel `${publicUrl}/t/o/<token>` is appended. Tokens are compact (they appear in every link):
 * base64url of version ‖ kind ‖ email id (16 bytes) ‖ [link URL] ‖ HMAC-SHA256 truncated to
 * 12 bytes, under a key derived from the app secret. A click token carries the URL it redirects
 * to, so the redirect can only go where that email linked, and any altered byte fails the MAC.
 */

const VERSION = 1;
/** Version 2 adds the signing time (uint32 seconds) after the email id, so links can expire. */
const VERSION_TIMED = 2;
const KIND_OPEN = 0x6f; // 'o'
const KIND_CLICK = 0x63; // 'c'
const MAC_BYTES = 12;
const HEADER_BYTES = 2 + 16;
/** Longer URLs are left untouched rather than producing unwieldy links. */
const MAX_URL_BYTES = 2048;
/** Distinct links tracked per message; further ones are left as written (each costs an HMAC). */
export const MAX_TRACKED_LINKS = 1000;

export type TrackingToken = { kind: 'open'; emailId: string } | { kind: 'click'; emailId: string; url: string };
/** A verified token and when it was signed (null for version-1 tokens, which carry no time). */
export type VerifiedTrackingToken = TrackingToken & { issuedAt: Date | null };

// A KeyObject, not a Buffer: createHmac imports a Buffer key anew on every call (5× the cost of the MAC).
const trackingKey = perSecret((secret) => createSecretKey(createHmac('sha256', secret).update('herald tracking tokens v1').digest()));

const mac = (secret: string, body: Buffer) => createHmac('sha256', trackingKey(secret)).update(body).digest().subarray(0, MAC_BYTES);

const uuidBytes = (id: string) => Buffer.from(id.replaceAll('-', ''), 'hex');

function uuidString(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function signTrackingToken(secret: string, t: TrackingToken, issuedAt: Date = new Date()): string {
  return tokenSigner(secret, t.emailId, issuedAt)(t.kind === 'click' ? t.url : null);
}

/**
 * Signs one email's tokens, all with the same signing time: the header, id and time are encoded
 * once for the message's links (a newsletter has dozens) instead of once a link. `url` null signs
 * the open token.
 */
function tokenSigner(secret: string, emailId: string, issuedAt: Date): (url: string | null) => string {
  const id = uuidBytes(emailId);
  if (id.length !== 16) throw new Error('tracking tokens name an email by its UUID');
  const head = Buffer.alloc(HEADER_BYTES + 4);
  head[0] = VERSION_TIMED;
  id.copy(head, 2);
  head.writeUInt32BE(Math.max(0, Math.min(0xffffffff, Math.floor(issuedAt.getTime() / 1000))), HEADER_BYTES);
  return (url) => {
    head[1] = url === null ? KIND_OPEN : KIND_CLICK;
    const body = url === null ? Buffer.from(head) : Buffer.concat([head, Buffer.from(url, 'utf8')]);
    return Buffer.concat([body, mac(secret, body)]).toString('base64url');
  };
}

/** The token's claims when it was signed with `secret` and is byte-for-byte unaltered; otherwise null. */
export function verifyTrackingToken(secret: string, token: string): VerifiedTrackingToken | null {
  if (typeof token !== 'string' || token.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const raw = Buffer.from(token, 'base64url');
  // base64url's last character can carry unused bits: only the canonical spelling is accepted.
  if (raw.toString('base64url') !== token || raw.length < HEADER_BYTES + MAC_BYTES) return null;
  const body = raw.subarray(0, raw.length - MAC_BYTES);
  const given = raw.subarray(raw.length - MAC_BYTES);
  if (!timingSafeEqual(given, mac(secret, body)) || (body[0] !== VERSION && body[0] !== VERSION_TIMED)) return null;
  const emailId = uuidString(body.subarray(2, HEADER_BYTES));
  const timed = body[0] === VERSION_TIMED;
  if (timed && body.length < HEADER_BYTES + 4) return null;
  const issuedAt = timed ? new Date(body.readUInt32BE(HEADER_BYTES) * 1000) : null;
  const rest = HEADER_BYTES + (timed ? 4 : 0);
  if (body[1] === KIND_OPEN && body.length === rest) return { kind: 'open', emailId, issuedAt };
  if (body[1] === KIND_CLICK && body.length > rest) {
    return { kind: 'click', emailId, url: body.subarray(rest).toString('utf8'), issuedAt };
  }
  return null;
}

/** Only absolute http(s) URLs are ever tracked or redirected to. */
export function isTrackableUrl(url: string): boolean {
  if (!/^https?:\/\//i.test(url)) return false;
  try {
    const u = new URL(url);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

export type TrackingOptions = {
  emailId: string;
  publicUrl: string;
  secret: string;
  opens: boolean;
  clicks: boolean;
};

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/** The URL an href attribute value denotes (HTML character references decoded). */
export function decodeHref(value: string): string {
  return value
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, ref: string) => {
      if (ref[0] === '#') {
        const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
        return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
      }
      return ENTITIES[ref.toLowerCase()] ?? whole;
    })
    .trim();
}

type HrefSpan = { start: number; end: number; value: string };

/** Tokenizer callbacks that collect the href value spans of every `<a>` and `<area>` start tag into `spans`. */
function hrefCollector(
  html: string,
  spans: HrefSpan[],
): Required<Pick<Alongside, 'onopentagname' | 'onattribname' | 'onattribdata' | 'onattribend' | 'onopentagend' | 'onselfclosingtag'>> {
  let tag = '';
  let attr = '';
  let valueStart = -1;
  let href: HrefSpan | null = null;
  const closeTag = () => {
    if (href) spans.push(href);
    tag = '';
    href = null;
  };
  return {
    onopentagname: (start, end) => {
      tag = html.slice(start, end).toLowerCase();
      href = null;
    },
    onattribname: (start, end) => {
      attr = end - start === 4 ? html.slice(start, end).toLowerCase() : '';
      valueStart = -1;
    },
    onattribdata: (start, end) => {
      if (valueStart === -1) valueStart = start;
      if (attr === 'href' && !href && (tag === 'a' || tag === 'area')) href = { start: valueStart, end, value: html.slice(valueStart, end) };
    },
    onattribend: () => {
      attr = '';
    },
    onopentagend: closeTag,
    onselfclosingtag: closeTag,
  };
}

/** The href value spans of every `<a>` and `<area>` start tag, found by a linear HTML tokenizer. */
function linkHrefSpans(html: string): HrefSpan[] {
  const spans: HrefSpan[] = [];
  const noop = () => {};
  const tokenizer = new Tokenizer(
    { decodeEntities: false },
    {
      ...hrefCollector(html, spans),
      onattribentity: noop,
      onclosetag: noop,
      oncdata: noop,
      oncomment: noop,
      ondeclaration: noop,
      onprocessinginstruction: noop,
      ontext: noop,
      ontextentity: noop,
      onend: noop,
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  return spans;
}

/** A message's click and open tracking, given where its links are. */
function trackingEdits(spans: HrefSpan[], opts: TrackingOptions, now: Date): { links: Edit[]; pixel: string | null } {
  const base = opts.publicUrl.replace(/\/+$/, '');
  const own = ['/unsubscribe/', '/subscribe/', '/manage/', '/t/'].map((p) => base + p);
  let signer: ((url: string | null) => string) | null = null;
  const sign = (url: string | null) => (signer ??= tokenSigner(opts.secret, opts.emailId, now))(url);
  const links: Edit[] = [];
  if (opts.clicks) {
    const tokens = new Map<string, string>();
    for (const span of spans) {
      const url = decodeHref(span.value);
      let token = tokens.get(url);
      if (token === undefined) {
        if (tokens.size >= MAX_TRACKED_LINKS) continue;
        if (!isTrackableUrl(url) || own.some((p) => url.startsWith(p)) || Buffer.byteLength(url) > MAX_URL_BYTES) continue;
        token = sign(url);
        tokens.set(url, token);
      }
      links.push({ start: span.start, end: span.end, text: `${base}/t/c/${token}` });
    }
  }
  const pixel = opts.opens ? `<img src="${base}/t/o/${sign(null)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />` : null;
  return { links, pixel };
}

/**
 * Rewrites the href of every http(s) link to the click redirect and appends the open pixel before
 * </body>. Left alone: mailto:, tel:, anchors, and the service's own links (unsubscribe, subscribe,
 * manage, and anything already under `${publicUrl}/t/`). Linear in the size of the HTML: a
 * tokenizer finds the links (a regular expression over tags is quadratic on unclosed `<a`).
 */
export function applyTracking(html: string, opts: TrackingOptions, now: Date = new Date()): string {
  const { links, pixel } = trackingEdits(opts.clicks ? linkHrefSpans(html) : [], opts, now);
  const linked = applyEdits(html, links);
  return pixel === null ? linked : appendToBody(linked, pixel);
}

/** What a tracked link may be written as for its tokenization to stay that of the link it replaces (in any quoting). */
const PLAIN_URL = /^[^\s"'`<>=]*$/;

/**
 * `applyTracking(html, opts)` and the text part's pre-pass over it, `boundNesting` (plain-text.ts),
 * from one tokenizer pass over `html` instead of two: the HTML was tokenized three times a
 * message. The pass finds the links and the bounding edits of `html`; both apply to the tracked
 * HTML as they are, because a tracked link (no quote, space, `<`, `>` or `=` in it) tokenizes as
 * the link it replaces, and the open pixel, a void element before a real `</body>`, opens nothing
 * and ends no text. Where those conditions do not hold, the two passes run (the same result).
 */
export function applyTrackingAndBound(
  html: string,
  opts: TrackingOptions,
  now: Date = new Date(),
  maxNesting = MAX_NESTING,
  maxWord = MAX_WORD,
): { html: string; bounded: string } {
  if (!opts.clicks || !PLAIN_URL.test(opts.publicUrl)) {
    const tracked = applyTracking(html, opts, now);
    return { html: tracked, bounded: boundNesting(tracked, maxNesting, maxWord) };
  }
  const bodyAt = html.search(/<\/body\s*>/i); // where appendToBody puts the pixel
  let closesBody = false; // whether that `</body>` is a close tag (not in a comment, an attribute or raw text)
  const spans: HrefSpan[] = [];
  const bounds = boundingEdits(html, maxNesting, maxWord, {
    ...hrefCollector(html, spans),
    onclosetag: (start) => {
      if (start - 2 === bodyAt) closesBody = true;
    },
  });
  const { links, pixel } = trackingEdits(spans, opts, now);
  const linked = applyEdits(html, links);
  const tracked = pixel === null ? linked : appendToBody(linked, pixel);
  if (pixel !== null && !closesBody) return { html: tracked, bounded: boundNesting(tracked, maxNesting, maxWord) };
  const both = mergeEdits(links, bounds);
  const bounded = applyEdits(html, both);
  if (pixel === null) return { html: tracked, bounded };
  const pixelAt = bodyAt + both.reduce((shift, e) => (e.end <= bodyAt ? shift + e.text.length - (e.end - e.start) : shift), 0);
  return { html: tracked, bounded: `${bounded.slice(0, pixelAt)}${pixel}${bounded.slice(pixelAt)}` };
}

/** Both lists of edits in order (each is in order); a dropped start tag takes the tracked link inside it with it. */
function mergeEdits(links: Edit[], bounds: Edit[]): Edit[] {
  const out: Edit[] = [];
  let l = 0;
  for (const bound of bounds) {
    while (l < links.length && (links[l] as Edit).start < bound.start) out.push(links[l++] as Edit);
    out.push(bound);
    while (l < links.length && (links[l] as Edit).end <= bound.end && bound.end > bound.start) l++;
  }
  while (l < links.length) out.push(links[l++] as Edit);
  return out;
}
