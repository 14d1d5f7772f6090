import { type KeyObject, X509Certificate, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { ApiError } from '../../http/errors.ts';

/**
 * Amazon SNS HTTP(S) message verification, per the AWS documentation: rebuild the canonical string
 * of the message, and check its signature (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA)
 * against the certificate at SigningCertURL, which must be an https `.pem` URL on
 * `sns.<region>.amazonaws.com`. With SNS_TRUSTED_CERT_FILE set, that local certificate stands in
 * for every (well-formed) SigningCertURL and nothing is fetched: tests use it.
 */

const SNS_HOST = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;

const optionalString = z
  .string()
  .nullish()
  .transform((v) => v ?? undefined);

export const snsMessageSchema = z.preprocess(
  (v) => {
    // SNS spells it SigningCertURL over HTTP; some relays (Lambda) write SigningCertUrl.
    if (v && typeof v === 'object' && !('SigningCertURL' in v) && 'SigningCertUrl' in v) {
      const { SigningCertUrl, ...rest } = v as Record<string, unknown>;
      return { ...rest, SigningCertURL: SigningCertUrl };
    }
    return v;
  },
  z.object({
    Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
    MessageId: z.string().min(1).max(200),
    TopicArn: z.string().min(1).max(1000),
    Message: z.string(),
    Timestamp: z.string().min(1).max(100),
    SignatureVersion: z.enum(['1', '2']),
    Signature: z.string().min(1).max(4096),
    SigningCertURL: z.string().min(1).max(2048),
    Subject: optionalString,
    SubscribeURL: optionalString,
    Token: optionalString,
    UnsubscribeURL: optionalString,
  }),
);

export type SnsMessage = z.infer<typeof snsMessageSchema>;

const forbidden = (message: string) => new ApiError(403, 'FORBIDDEN', message);

/** An https URL on an Amazon SNS endpoint host (`sns.<region>.amazonaws.com`, or `.com.cn`). */
export function isSnsUrl(value: string | undefined, opts: { pem?: boolean } = {}): boolean {
  if (!value) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' || url.username || url.password || (url.port && url.port !== '443')) return false;
  if (!SNS_HOST.test(url.hostname)) return false;
  return !opts.pem || url.pathname.endsWith('.pem');
}

/** The string SNS signed: selected fields as `Name\nvalue\n`, in this order. */
export function canonicalString(m: SnsMessage): string {
  const keys: (keyof SnsMessage)[] =
    m.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  let out = '';
  for (const key of keys) {
    const value = m[key];
    if (value === undefined) {
      if (key === 'Subject') continue; // the one optional field
      throw forbidden(`SNS message lacks ${key}`);
    }
    out += `${key}\n${value}\n`;
  }
  return out;
}

export type CertificateSource = { publicKeyFor: (certUrl: string) => Promise<KeyObject> };

const MAX_CACHED = 50;

/** Certificates by URL (they change rarely: SNS rotates them with a new URL), or the configured local one. */
export function certificateSource(config: Config): CertificateSource {
  let trusted: KeyObject | null = null;
  const cache = new Map<string, KeyObject>();
  return {
    publicKeyFor: async (certUrl) => {
      if (config.snsTrustedCertFile) {
        trusted ??= new X509Certificate(readFileSync(config.snsTrustedCertFile)).publicKey;
        return trusted;
      }
      const hit = cache.get(certUrl);
      if (hit) return hit;
      let pem: string;
      try {
        const res = await fetch(certUrl, { redirect: 'error', signal: AbortSignal.timeout(5000) });
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        pem = await res.text();
      } catch (err) {
        throw forbidden(`The SNS signing certificate could not be fetched (${(err as Error).message})`);
      }
      let key: KeyObject;
      try {
        key = new X509Certificate(pem).publicKey;
      } catch {
        throw forbidden('The SNS signing certificate is not a valid X.509 certificate');
      }
      if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
      cache.set(certUrl, key);
      return key;
    },
  };
}

/** Throws 403 unless the message carries a valid signature from a trusted SNS certificate. */
export async function verifySnsMessage(m: SnsMessage, certs: CertificateSource): Promise<void> {
  if (!isSnsUrl(m.SigningCertURL, { pem: true })) {
    throw forbidden('SigningCertURL is not an Amazon SNS certificate URL');
  }
  const key = await certs.publicKeyFor(m.SigningCertURL);
  const algorithm = m.SignatureVersion === '1' ? 'sha1' : 'sha256';
  let valid = false;
  try {
    valid = verify(algorithm, Buffer.from(canonicalString(m), 'utf8'), key, Buffer.from(m.Signature, 'base64'));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    valid = false;
  }
  if (!valid) throw forbidden('Invalid SNS message signature');
}

/** Confirms a subscription by fetching its SubscribeURL, only on an Amazon SNS host. */
export async function confirmSubscription(m: SnsMessage): Promise<void> {
  if (!isSnsUrl(m.SubscribeURL)) {
    throw new ApiError(400, 'BAD_REQUEST', 'SubscribeURL is not an Amazon SNS URL; the subscription was not confirmed');
  }
  try {
    const res = await fetch(m.SubscribeURL!, { redirect: 'error', signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    await res.body?.cancel();
  } catch (err) {
    throw new ApiError(502, 'SUBSCRIPTION_CONFIRMATION_FAILED', `Confirming the SNS subscription failed (${(err as Error).message})`);
  }
}
