import ipaddr from 'ipaddr.js';
import { isPublicAddress } from './engine/webhook.ts';

/**
 * Where a WEBHOOK step may not point (decisions.md § 7) unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true.
 * One rule for the API (literal hosts in a step's url) and the sender (every resolved address of
 * every hop): an address is allowed only when it is public unicast (`isPublicAddress`).
 */

/** Host names that always mean this machine or a cloud metadata service. */
const BLOCKED_NAMES = /^(localhost|metadata|metadata\.google\.internal|metadata\.goog)\.?$|\.localhost\.?$/i;

/** Whether an IP address literal (v4, v6, `[v6]`) is one a webhook may not reach; false for names. */
export function isBlockedAddress(address: string): boolean {
  const ip = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  return ipaddr.isValid(ip) && !isPublicAddress(ip);
}

/** Whether a URL host (as `new URL().hostname` gives it) is a blocked literal address or name. */
export function isBlockedHost(hostname: string): boolean {
  return BLOCKED_NAMES.test(hostname) || isBlockedAddress(hostname);
}
