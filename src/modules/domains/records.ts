import { isIP } from 'node:net';
import type { Config } from '../../config.ts';
import type { StoredDnsRecord } from '../../db/schema/domains.ts';
import { DKIM_SELECTOR, dkimRecordValue } from './dkim-keys.ts';

export const DMARC_VALUE = 'v=DMARC1; p=none;';

/**
 * The SPF mechanism that authorises the host that hands Herald's mail to the world: the SMTP
 * relay when one is configured, otherwise this server's public host.
 */
export function spfMechanism(config: Pick<Config, 'smtpUrl' | 'publicUrl'>): string {
  const source = config.smtpUrl ?? config.publicUrl;
  let host = 'localhost';
  try {
    host = new URL(source).hostname.replace(/^\[|\]$/g, '') || host;
  } catch {
    // keep the fallback: config validation already rejects malformed URLs
  }
  const family = isIP(host);
  if (family === 4) return `ip4:${host}`;
  if (family === 6) return `ip6:${host}`;
  return `a:${host.toLowerCase()}`;
}

/** The records a domain owner publishes. Only DKIM gates verification; SPF and DMARC are advice. */
export function recordsFor(domain: string, publicKey: string, config: Pick<Config, 'smtpUrl' | 'publicUrl'>): StoredDnsRecord[] {
  return [
    {
      type: 'TXT',
      name: `${DKIM_SELECTOR}._domainkey.${domain}`,
      value: dkimRecordValue(publicKey),
      purpose: 'dkim',
      required: true,
    },
    {
      type: 'TXT',
      name: domain,
      value: `v=spf1 ${spfMechanism(config)} ~all`,
      purpose: 'spf',
      required: false,
    },
    {
      type: 'TXT',
      name: `_dmarc.${domain}`,
      value: DMARC_VALUE,
      purpose: 'dmarc',
      required: false,
    },
  ];
}
