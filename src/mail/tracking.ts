import { createHmac, timingSafeEqual } from 'node:crypto';
import { appendToBody } from './locales.ts';

/**
 * Open and click tracking of outgoing HTML: links become `${publicUrl}/t/c/<token>` and a 1×1
 * pixel `${publicUrl}/t/o/<token>` is appended. Tokens are compact (they appear in every link):
 * base64url of version ‖ kind ‖ email id (16 bytes) ‖ [link URL] ‖ HMAC-SHA256 truncated to
 * 12 bytes, under a key derived from the app secret. A click token carries the URL it redirects
 * to, so the redirect can only go where that email linked, and any altered byte fails the MAC.
 */

const VERSION = 1;
const KIND_OPEN = 0x6f; // 'o'
const KIND_CLICK = 0x63; // 'c'
const MAC_BYTES = 12;
const HEADER_BYTES = 2 + 16;
/** Longer URLs are left untouched rather than producing unwieldy links. */
const MAX_URL_BYTES = 2048;

export type TrackingToken = { kind: 'open'; emailId: string } | { kind: 'click'; emailId: string; url: string };

const keyCache = new Map<string, Buffer>();
function trackingKey(secret: string): Buffer {
  let key = keyCache.get(secret);
  if (!key) {
    key = createHmac('sha256', secret).update('herald tracking tokens v1').digest();
    keyCache.set(secret, key);
  }
  return key;
}

const mac = (secret: string, body: Buffer) => createHmac('sha256', trackingKey(secret)).update(body).digest().subarray(0, MAC_BYTES);

const uuidBytes = (id: string) => Buffer.from(id.replaceAll('-', ''), 'hex');

function uuidString(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function signTrackingToken(secret: string, t: TrackingToken): string {
  const id = uuidBytes(t.emailId);
  if (id.length !== 16) throw new Error('tracking tokens name an email by its UUID');
  const header = Buffer.from([VERSION, t.kind === 'open' ? KIND_OPEN : KIND_CLICK]);
  const body = Buffer.concat([header, id, t.kind === 'click' ? Buffer.from(t.url, 'utf8') : Buffer.alloc(0)]);
  return Buffer.concat([body, mac(secret, body)]).toString('base64url');
}

/** The token's claims when it was signed with `secret` and is byte-for-byte unaltered; otherwise null. */
export function verifyTrackingToken(secret: string, token: string): TrackingToken | null {
  if (typeof token !== 'string' || token.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const raw = Buffer.from(token, 'base64url');
  // base64url's last character can carry unused bits: only the canonical spelling is accepted.
  if (raw.toString('base64url') !== token || raw.length < HEADER_BYTES + MAC_BYTES) return null;
  const body = raw.subarray(0, raw.length - MAC_BYTES);
  const given = raw.subarray(raw.length - MAC_BYTES);
  if (!timingSafeEqual(given, mac(secret, body)) || body[0] !== VERSION) return null;
  const emailId = uuidString(body.subarray(2, HEADER_BYTES));
  if (body[1] === KIND_OPEN && body.length === HEADER_BYTES) return { kind: 'open', emailId };
  if (body[1] === KIND_CLICK && body.length > HEADER_BYTES) {
    return { kind: 'click', emailId, url: body.subarray(HEADER_BYTES).toString('utf8') };
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

// An <a> or <area> start tag, with quoted attribute values that may contain '>'.
const LINK_TAG = /<(a|area)\b((?:[^>"']|"[^"]*"|'[^']*')*)>/gi;
const HREF_ATTR = /(\shref\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)/i;

/**
 * Rewrites the href of every http(s) link to the click redirect and appends the open pixel before
 * </body>. Left alone: mailto:, tel:, anchors, and the service's own links (unsubscribe, subscribe,
 * manage, and anything already under `${publicUrl}/t/`).
 */
export function applyTracking(html: string, opts: TrackingOptions): string {
  const base = opts.publicUrl.replace(/\/+$/, '');
  const own = ['/unsubscribe/', '/subscribe/', '/manage/', '/t/'].map((p) => base + p);
  let out = html;
  if (opts.clicks) {
    out = out.replace(LINK_TAG, (tag: string, name: string, attrs: string) => {
      const m = HREF_ATTR.exec(attrs);
      if (!m) return tag;
      const quoted = m[2];
      const value = quoted[0] === '"' || quoted[0] === "'" ? quoted.slice(1, -1) : quoted;
      const url = decodeHref(value);
      if (!isTrackableUrl(url) || own.some((p) => url.startsWith(p)) || Buffer.byteLength(url) > MAX_URL_BYTES) return tag;
      const token = signTrackingToken(opts.secret, { kind: 'click', emailId: opts.emailId, url });
      const rewritten = attrs.slice(0, m.index) + `${m[1]}"${base}/t/c/${token}"` + attrs.slice(m.index + m[0].length);
      return `<${name}${rewritten}>`;
    });
  }
  if (opts.opens) {
    const token = signTrackingToken(opts.secret, { kind: 'open', emailId: opts.emailId });
    out = appendToBody(
      out,
      `<img src="${base}/t/o/${token}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />`,
    );
  }
  return out;
}
