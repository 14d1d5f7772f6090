import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { domains } from '../../db/schema/domains.ts';
import { ApiError } from '../../http/errors.ts';
import { decryptPrivateKey } from './dkim-keys.ts';
import { isSandboxDomain, SANDBOX_DOMAIN, sandboxSender } from './sandbox.ts';

export type SenderDomain = { id: string; domain: string; dkimSelector: string; dkimPrivateKeyPem: string };

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

/** The sender's domain is not verified for the project (403 in the API; the delivery worker fails the email with its message). */
export class SenderNotVerifiedError extends ApiError {
  constructor(domain: string) {
    super(403, 'INTERNAL_SERVER_ERROR', `Domain ${domain} is not verified for this project`, {
      details: { domain },
      suggestion: `Add the domain with POST /domains, publish its DNS records, then check it with GET /domains/:id/verify; or, while mail is captured (SMTP_URL unset), send from any address @${SANDBOX_DOMAIN}`,
    });
  }
}

export const notVerified = (domain: string) => new SenderNotVerifiedError(domain);

/** The verified domain (exact or parent) that may send as `fromEmail` for the project; throws SenderNotVerifiedError otherwise. */
export async function senderDomainFor(ctx: AppContext, projectId: string, fromEmail: string): Promise<SenderDomain> {
  // Cached on the context; a domain added, verified, unverified or deleted in any process evicts
  // the project's entries in every process (ctx.keys.notifyChanged).
  const key = emailDomain(fromEmail);
  return ctx.caches.senders.getOrLoad(projectId, key, () => lookupSender(ctx, projectId, fromEmail));
}

async function lookupSender(ctx: AppContext, projectId: string, fromEmail: string): Promise<SenderDomain> {
  const domain = emailDomain(fromEmail);
  if (isSandboxDomain(domain)) return sandboxSender(ctx.config);
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
    dkimPrivateKeyPem: decryptPrivateKey(row.dkimPrivateKeyEnc, ctx.config.jwtSecret),
  };
}
