import { createHmac } from 'node:crypto';
import { type Resolver, lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The WEBHOOK step's HTTP call (decisions.md § 7): one attempt, signed, with an Idempotency-Key,
 * a 10 s budget for the whole attempt (redirects included), and the SSRF guard: every hop's host
 * is resolved once, every resolved address must be public unicast, and the connection goes to
 * that very address (no second lookup a rebinding DNS server could answer differently).
 * Retrying is the engine's job (it waits durably between attempts).
 */

export const WEBHOOK_TIMEOUT_MS = 10_000;
export const MAX_REDIRECTS = 5;
export const RESPONSE_BODY_LIMIT = 1024;
const USER_AGENT = 'Herald-Webhooks/1.0';

export type WebhookRequest = {
  url: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers: Record<string, string>;
  /** The exact bytes sent (and signed); null sends no body. */
  body: string | null;
};

export type WebhookAttempt = {
  /** 2xx. */
  ok: boolean;
  /** A network error, a timeout, 429 or 5xx: worth another attempt. */
  retryable: boolean;
  status: number | null;
  /** The first 1 KB of the response body (UTF-8, possibly cut mid-character). */
  body: string;
  error: string | null;
  /** Seconds from a 429/503 Retry-After header, when given as a number. */
  retryAfterSeconds: number | null;
  durationMs: number;
};

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the project's webhook secret. */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

export class BlockedAddressError extends Error {}

/** Whether an address may be called: public unicast only (no private, loopback, link-local, metadata, CGNAT, multicast or reserved). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.process(address); // IPv4-mapped IPv6 is judged as the IPv4 address it carries
  return ip.range() === 'unicast';
}

type Resolved = { address: string; family: 4 | 6 };

/** A and AAAA records through `resolver` (the process's DNS servers, DNS_SERVERS), or the system lookup. */
async function addressesOf(host: string, resolver: Resolver | undefined): Promise<Resolved[]> {
  if (!resolver) {
    const all = await dnsLookup(host, { all: true, verbatim: true });
    return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  }
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
  const found: Resolved[] = [
    ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
    ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
  ];
  if (found.length === 0 && v4.status === 'rejected') throw v4.reason;
  return found;
}

/** Resolves a hop's host once; refuses it when any address is not public (unless private networks are allowed). */
async function resolveHost(hostname: string, allowPrivate: boolean, resolver: Resolver | undefined): Promise<Resolved> {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  let found: Resolved[];
  if (ipaddr.isValid(host)) {
    found = [{ address: host, family: ipaddr.parse(host).kind() === 'ipv6' ? 6 : 4 }];
  } else {
    found = await addressesOf(host, resolver);
  }
  if (found.length === 0) throw new Error(`could not resolve ${host}`);
  if (!allowPrivate) {
    const blocked = found.find((a) => !isPublicAddress(a.address));
    if (blocked) throw new BlockedAddressError(`refused: ${host} resolves to a private or reserved address (${blocked.address})`);
  }
  return found[0];
}

/** A lookup that answers with the address resolved (and checked) before connecting. */
const pinned = (r: Resolved): LookupFunction =>
  ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
    if (opts?.all) cb(null, [{ address: r.address, family: r.family }]);
    else cb(null, r.address, r.family);
  }) as unknown as LookupFunction;

type HopResult = { status: number; headers: http.IncomingHttpHeaders; body: string };

function requestOnce(url: URL, req: WebhookRequest, resolved: Resolved, signal: AbortSignal, body: string | null): Promise<HopResult> {
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const r = mod.request(
      url,
      {
        method: req.method,
        headers: { ...req.headers, ...(body !== null ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
        lookup: pinned(resolved),
        agent: false,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8') });
          res.destroy();
        };
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          size += c.length;
          if (size >= RESPONSE_BODY_LIMIT) done();
        });
        res.on('end', done);
        res.on('error', (err) => (size > 0 ? done() : reject(err)));
      },
    );
    r.on('error', reject);
    if (body !== null) r.write(body);
    r.end();
  });
}

function retryAfter(h: http.IncomingHttpHeaders): number | null {
  const v = h['retry-after'];
  return typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v.trim()) : null;
}

/**
 * One webhook attempt: signs the body, adds the Idempotency-Key, follows up to MAX_REDIRECTS
 * redirects (each hop checked), within WEBHOOK_TIMEOUT_MS. Never throws.
 */
export async function callWebhook(
  req: WebhookRequest,
  opts: { secret: string; idempotencyKey: string; allowPrivate: boolean; resolver?: Resolver; timeoutMs?: number; nowSeconds?: number },
): Promise<WebhookAttempt> {
  const started = Date.now();
  const signal = AbortSignal.timeout(opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS);
  const payload = req.body ?? '';
  const headers: Record<string, string> = {
    'user-agent': USER_AGENT,
    ...(req.body !== null ? { 'content-type': 'application/json' } : {}),
    ...Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v.replace(/[\r\n]+/g, ' ')])),
    'idempotency-key': opts.idempotencyKey,
    'x-herald-signature': signatureHeader(opts.secret, payload, opts.nowSeconds ?? Math.floor(Date.now() / 1000)),
  };
  delete headers.host;
  delete headers['content-length'];
  const result = (a: Partial<WebhookAttempt>): WebhookAttempt => ({
    ok: false,
    retryable: false,
    status: null,
    body: '',
    error: null,
    retryAfterSeconds: null,
    durationMs: Date.now() - started,
    ...a,
  });

  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    return result({ error: 'invalid URL' });
  }
  let method = req.method;
  let body = req.body;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return result({ error: `refused: ${url.protocol} URLs are not allowed` });
    if (url.username || url.password) return result({ error: 'refused: URLs with credentials are not allowed' });
    let res: HopResult;
    try {
      const resolved = await resolveHost(url.hostname, opts.allowPrivate, opts.resolver);
      res = await requestOnce(url, { ...req, method, headers }, resolved, signal, body);
    } catch (err) {
      if (err instanceof BlockedAddressError) return result({ error: err.message });
      const timedOut = signal.aborted;
      return result({ retryable: true, error: timedOut ? `timed out after ${(opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS) / 1000} s` : networkError(err) });
    }
    const location = res.headers.location;
    if ([301, 302, 303, 307, 308].includes(res.status) && typeof location === 'string') {
      try {
        url = new URL(location, url);
      } catch {
        return result({ status: res.status, body: res.body, error: 'redirect to an invalid URL' });
      }
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = null;
        delete headers['content-type'];
      }
      continue;
    }
    const ok = res.status >= 200 && res.status < 300;
    const retryable = res.status === 429 || res.status >= 500;
    return result({
      ok,
      retryable,
      status: res.status,
      body: res.body,
      error: ok ? null : `HTTP ${res.status}`,
      retryAfterSeconds: retryable ? retryAfter(res.headers) : null,
    });
  }
  return result({ error: `more than ${MAX_REDIRECTS} redirects` });
}

function networkError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ? `network error: ${e.code}` : `network error: ${e.message ?? String(err)}`;
}
