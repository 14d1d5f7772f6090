import { verify } from 'node:crypto';
import { z } from 'zod';
import { ApiError } from '../../http/errors.ts';
import type { CertificateSource } from './sns-certificates.ts';

export { type CertificateSource, certificateSource } from './sns-certificates.ts';

/**
 * Amazon SNS HTTP(S) message verification, per the AWS documentation: rebuild the canonical string
 * of the message, and check its signature (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA)
 * against the certificate at SigningCertURL, which must be exactly
 * `https://sns.<region of the TopicArn>.amazonaws.com[.cn]/SimpleNotificationService-<id>.pem`
 * (Amazon's ids are hex; letters and digits are accepted).
 * With SNS_TRUSTED_CERT_FILE set, that local certificate stands in for every accepted
 * SigningCertURL and nothing is fetched: tests use it.
 */

const SNS_HOST = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;
/** Matched against the URL as sent: no userinfo, port, query, fragment or escapes can pass. */
const SIGNING_CERT_URL = /^https:\/\/sns\.([a-z0-9-]{1,40})\.amazonaws\.com(\.cn)?\/SimpleNotificationService-[0-9A-Za-z]{1,64}\.pem$/;
const TOPIC_ARN = /^arn:(aws[a-z-]*):sns:([a-z0-9-]+):/;

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
export function isSnsUrl(value: string | undefined): boolean {
  if (!value) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' || url.username || url.password || (url.port && url.port !== '443')) return false;
  return SNS_HOST.test(url.hostname);
}

/**
 * Whether `certUrl` is where SNS keeps the certificate for messages of `topicArn`: the Amazon SNS
 * endpoint of the topic's own region, `.amazonaws.com.cn` in the aws-cn partition.
 */
export function isSigningCertUrlFor(certUrl: string, topicArn: string): boolean {
  const cert = SIGNING_CERT_URL.exec(certUrl);
  const topic = TOPIC_ARN.exec(topicArn);
  if (!cert || !topic) return false;
  const [, certRegion, chinaSuffix] = cert;
  const [, partition, topicRegion] = topic;
  return certRegion === topicRegion && (chinaSuffix === '.cn') === (partition === 'aws-cn');
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

/** Throws 403 unless the message carries a valid signature from a trusted SNS certificate. */
export async function verifySnsMessage(m: SnsMessage, certs: CertificateSource): Promise<void> {
  if (!isSigningCertUrlFor(m.SigningCertURL, m.TopicArn)) {
    throw forbidden("SigningCertURL is not an Amazon SNS certificate URL of the topic's region");
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
