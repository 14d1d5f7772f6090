import { type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config } from '../../config.ts';
import { ApiError } from '../../http/errors.ts';
import { LruCache } from '../../render/lru.ts';

/**
 * The public keys of SNS signing certificates, by SigningCertURL. The URL has been checked
 * (`isSigningCertUrlFor` in sns.ts) before it gets here, but its file name is still the caller's
 * choice, so every fetch is bounded: one in flight per URL, a failure remembered for 15 s,
 * a time limit, and a size limit on the body.
 */

export type CertificateSource = { publicKeyFor: (certUrl: string) => Promise<KeyObject> };

/** A certificate is ~2 KB: a body longer than this is not one, and is not read further. */
export const MAX_CERTIFICATE_BYTES = 16 * 1024;
const FETCH_TIMEOUT_MS = 5000;
/** SNS rotates certificates under new URLs: a few are live per region, so this bound is never reached in practice. */
export const MAX_CACHED_CERTIFICATES = 50;
/**
 * A URL that failed is answered from memory for this long: less than the 20 s SNS waits before
 * retrying a delivery by default (3 retries, 20 s apart), so one failed fetch of a genuine
 * certificate does not refuse every retry of the message.
 */
export const FAILURE_TTL_MS = 15_000;
export const MAX_CACHED_FAILURES = 1000;

const forbidden = (message: string) => new ApiError(403, 'FORBIDDEN', message);

/** The body as text, refusing (and cancelling) it once it passes `limit` bytes. */
async function readCapped(res: Response, limit: number): Promise<string> {
  const tooLarge = () => new Error(`larger than ${limit / 1024} KB`);
  if (Number(res.headers.get('content-length') ?? 0) > limit) {
    await res.body?.cancel();
    throw tooLarge();
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString('utf8');
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
}

async function downloadCertificate(certUrl: string): Promise<string> {
  try {
    const res = await fetch(certUrl, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`HTTP ${res.status}`);
    }
    return await readCapped(res, MAX_CERTIFICATE_BYTES);
  } catch (err) {
    throw new Error(`The SNS signing certificate could not be fetched (${(err as Error).message})`);
  }
}

function publicKeyOf(pem: string): KeyObject {
  try {
    return new X509Certificate(pem).publicKey;
  } catch {
    throw new Error('The SNS signing certificate is not a valid X.509 certificate');
  }
}

/**
 * Certificates by URL, or the configured local one (SNS_TRUSTED_CERT_FILE: it stands in for every
 * accepted SigningCertURL and nothing is fetched; tests use it). `now` is for tests.
 */
export function certificateSource(config: Pick<Config, 'snsTrustedCertFile'>, opts: { now?: () => number } = {}): CertificateSource {
  const now = opts.now ?? Date.now;
  let trusted: KeyObject | null = null;
  const keys = new LruCache<string, KeyObject>(MAX_CACHED_CERTIFICATES);
  // Kept apart from `keys`, so that failing URLs never push a working certificate out.
  const failures = new LruCache<string, { until: number; message: string }>(MAX_CACHED_FAILURES);
  const inFlight = new Map<string, Promise<KeyObject>>();

  function recentFailure(certUrl: string): string | undefined {
    const failure = failures.get(certUrl);
    if (failure && failure.until > now()) return failure.message;
    if (failure) failures.delete(certUrl);
    return undefined;
  }

  async function load(certUrl: string): Promise<KeyObject> {
    try {
      const key = publicKeyOf(await downloadCertificate(certUrl));
      keys.set(certUrl, key);
      return key;
    } catch (err) {
      const message = (err as Error).message;
      failures.set(certUrl, { until: now() + FAILURE_TTL_MS, message });
      throw forbidden(message);
    } finally {
      inFlight.delete(certUrl);
    }
  }

  return {
    publicKeyFor: async (certUrl) => {
      if (config.snsTrustedCertFile) {
        trusted ??= new X509Certificate(readFileSync(config.snsTrustedCertFile)).publicKey;
        return trusted;
      }
      const key = keys.get(certUrl);
      if (key) return key;
      const failed = recentFailure(certUrl);
      if (failed) throw forbidden(failed);
      let pending = inFlight.get(certUrl);
      if (!pending) {
        pending = load(certUrl);
        inFlight.set(certUrl, pending);
      }
      return pending;
    },
  };
}
