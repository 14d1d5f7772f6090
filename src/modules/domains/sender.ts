import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { domains } from '../../db/schema/domains.ts';
import { ApiError } from '../../http/errors.ts';
import { decryptPrivateKey } from './dkim-keys.ts';

export type SenderDomain = { id: string; domain: string; dkimSelector: string; dkimPrivateKeyPem: string };

/**
 * Checks other modules register to block deleting a domain they still send from. Each returns a
 * description of one user ('template "Welcome"') or null. A sender uses `domain` when its address's
 * domain is `domain` or a subdomain of it: see `senderUsesDomain` and `fromDomainMatchesSql`.
 */
export const senderUsageChecks: Array<(db: Db, projectId: string, domain: string) => Promise<string | null>> = [];

/** The domain part of an address, lower-cased, without a trailing dot. */
export function emailDomain(email: string): string {
  const at = email.lastIndexOf('@');
  return (at >= 0 ? email.slice(at + 1) : email).trim().toLowerCase().replace(/\.$/, '');
}

/** `news.example.com` → ['news.example.com', 'example.com'] (never a bare TLD). */
export function domainAndParents(domain: string): string[] {
  const labels = domain.split('.').filter(Boolean);
  const out: string[] = [];
  for (let i = 0; i < labels.length - 1; i++) out.push(labels.slice(i).join('.'));
  return out;
}

/** Whether a from address is sent under `domain` (the domain itself or a subdomain of it). */
export function senderUsesDomain(fromEmail: string, domain: string): boolean {
  const d = emailDomain(fromEmail);
  return d === domain || d.endsWith(`.${domain}`);
}

/** SQL: the address in `column` is sent under `domain` (same rule as `senderUsesDomain`). */
export function fromDomainMatchesSql(column: unknown, domain: string) {
  // Domains are [a-z0-9.-] only (see normaliseDomain), so they need no LIKE escaping.
  return sql`(lower(split_part(${column}, '@', 2)) = ${domain} OR lower(split_part(${column}, '@', 2)) LIKE ${`%.${domain}`})`;
}

export const notVerified = (domain: string) =>
  new ApiError(403, 'INTERNAL_SERVER_ERROR', `Domain ${domain} is not verified for this project`, {
    details: { domain },
    suggestion: 'Add the domain with POST /domains, publish its DNS records, then check it with GET /domains/:id/verify',
  });

// Decrypted keys by ciphertext: workers call senderDomainFor per message and RSA PEMs never change.
const pemCache = new Map<string, string>();
const PEM_CACHE_MAX = 1000;

function privateKeyPem(encrypted: string, secret: string): string {
  const cached = pemCache.get(encrypted);
  if (cached) return cached;
  const pem = decryptPrivateKey(encrypted, secret);
  if (pemCache.size >= PEM_CACHE_MAX) pemCache.delete(pemCache.keys().next().value!);
  pemCache.set(encrypted, pem);
  return pem;
}

// Verified senders by project and address domain, briefly: /v1/send and every delivered message
// ask. Status changes in this process clear a project's entries; other processes see them within
// SENDER_CACHE_MS.
const SENDER_CACHE_MS = 10_000;
const senderCache = new Map<string, { sender: SenderDomain; until: number }>();

export function forgetSenders(projectId: string): void {
  for (const key of senderCache.keys()) if (key.startsWith(`${projectId}|`)) senderCache.delete(key);
}

/** The verified domain (exact or parent) that may send as `fromEmail` for the project; throws ApiError(403, 'INTERNAL_SERVER_ERROR', 'Domain <d> is not verified …') otherwise. */
export async function senderDomainFor(ctx: AppContext, projectId: string, fromEmail: string): Promise<SenderDomain> {
  const key = `${projectId}|${emailDomain(fromEmail)}`;
  const hit = senderCache.get(key);
  if (hit && hit.until > Date.now()) return hit.sender;
  const sender = await lookupSender(ctx, projectId, fromEmail);
  if (senderCache.size > 10_000) senderCache.clear();
  senderCache.set(key, { sender, until: Date.now() + SENDER_CACHE_MS });
  return sender;
}

async function lookupSender(ctx: AppContext, projectId: string, fromEmail: string): Promise<SenderDomain> {
  const domain = emailDomain(fromEmail);
  const candidates = domainAndParents(domain);
  if (candidates.length === 0) throw notVerified(domain);
  const [row] = await ctx.database.db
    .select({
      id: domains.id,
      domain: domains.domain,
      dkimSelector: domains.dkimSelector,
      dkimPrivateKeyEnc: domains.dkimPrivateKeyEnc,
    })
    .from(domains)
    .where(and(eq(domains.projectId, projectId), eq(domains.status, 'verified'), inArray(domains.domain, candidates)))
    .orderBy(desc(sql`length(${domains.domain})`))
    .limit(1);
  if (!row) throw notVerified(domain);
  return {
    id: row.id,
    domain: row.domain,
    dkimSelector: row.dkimSelector,
    dkimPrivateKeyPem: privateKeyPem(row.dkimPrivateKeyEnc, ctx.config.jwtSecret),
  };
}
