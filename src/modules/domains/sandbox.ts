import type { Config } from '../../config.ts';
import { ApiError } from '../../http/errors.ts';
import { DKIM_SELECTOR, type DkimKeyPair, generateDkimKey } from './dkim-keys.ts';

/**
 * The built-in sandbox sender: while mail is captured (no SMTP_URL), every project may send from
 * any address at this reserved domain without DNS, so a first email works on a laptop. `.test` is
 * reserved by RFC 2606 and never resolves, so nothing sent from it could reach a real inbox anyway.
 */
export const SANDBOX_DOMAIN = 'sandbox.herald.test';

export const isSandboxDomain = (domain: string) => domain === SANDBOX_DOMAIN;

export const sandboxUnavailable = () =>
  new ApiError(403, 'INTERNAL_SERVER_ERROR', `The sandbox sender @${SANDBOX_DOMAIN} only works while mail is captured; SMTP_URL is set`, {
    details: { domain: SANDBOX_DOMAIN },
    suggestion: 'Send from a domain verified for this project (POST /domains, publish its DNS records, GET /domains/:id/verify)',
  });

export const sandboxReserved = () =>
  new ApiError(409, 'CONFLICT', `${SANDBOX_DOMAIN} is Herald's built-in sandbox sender and cannot be added as a domain`, {
    details: { domain: SANDBOX_DOMAIN },
  });

// One signing key per process: captured sandbox mail is signed like any other, and the key
// is never published anywhere, so it does not need to survive a restart.
let sandboxKey: Promise<DkimKeyPair> | null = null;

/** The sender for a sandbox address; refused once SMTP_URL is set. */
export async function sandboxSender(config: Config) {
  if (config.smtpUrl) throw sandboxUnavailable();
  sandboxKey ??= generateDkimKey();
  const key = await sandboxKey;
  return { id: 'sandbox', domain: SANDBOX_DOMAIN, dkimSelector: DKIM_SELECTOR, dkimPrivateKeyPem: key.privateKeyPem };
}
