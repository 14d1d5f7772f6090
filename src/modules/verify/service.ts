import type { DnsChecker, DomainDns } from './dns.ts';
import { aliasMatch, disposableMatch, isPersonalProvider, typoSuggestion } from './providers.ts';
import { isWritableEmail } from '../contacts/schemas.ts';
import { internalSuffix, parseAddress } from './syntax.ts';

export type VerifyResult = {
  email: string;
  valid: boolean;
  isDisposable: boolean;
  isAlias: boolean;
  isTypo: boolean;
  isPlusAddressed: boolean;
  isPersonalEmail: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  reasons: string[];
  suggestedEmail?: string;
};

export const VALID_REASON = 'Email appears to be valid';

const UNWRITABLE =
  "Herald's contacts and sending take only letters, digits and . _ ' + - before the @ and an ASCII domain name (an internationalised domain in its xn-- form)";

/**
 * The verdict on one address (already trimmed and past the LOOSE_EMAIL gate). `valid` needs good
 * syntax, an existing domain and an MX record; the other flags inform without invalidating
 * (decisions.md § 9). Every false or flagged item gets a reason.
 */
export async function verifyEmail(dns: DnsChecker, input: string): Promise<VerifyResult> {
  const email = input.toLowerCase();
  const { local, domain, asciiDomain, syntaxError: rfcError } = parseAddress(email);
  // RFC-valid is not enough: an address the write paths refuse cannot be stored or sent to.
  const syntaxError = rfcError ?? (isWritableEmail(email) ? null : UNWRITABLE);
  const reasons: string[] = [];
  if (syntaxError) reasons.push(`Invalid email syntax: ${syntaxError}`);

  // Special-use and internal names are never looked up: the answer would map the server's network.
  const internal = asciiDomain ? internalSuffix(asciiDomain) : null;
  const result = asciiDomain && !internal ? await dns.lookup(asciiDomain) : null;
  const domainExists = result?.exists ?? false;
  const hasMxRecords = Boolean(result && result.mx.outcome === 'found' && !result.mx.nullMx);
  const hasWebsite = result?.address === 'found';
  if (internal) reasons.push(`Domain ${domain} is a special-use or internal name (.${internal}), so it was not looked up and cannot receive email`);
  else reasons.push(...dnsReasons(domain, result, { hasMxRecords, hasWebsite }));

  const listed = asciiDomain ?? domain;
  const disposable = disposableMatch(listed);
  if (disposable) reasons.push(`${disposable} is a disposable (temporary) email provider`);
  const alias = aliasMatch(listed);
  if (alias) reasons.push(`${alias} is an email forwarding (alias) service`);

  const plus = /^[^+]+\+/.test(local);
  if (plus) reasons.push('Address uses plus addressing (a +tag after the mailbox name)');

  const suggestedDomain = asciiDomain ? typoSuggestion(local, asciiDomain, result?.missing === 'nxdomain') : null;
  const suggestedEmail = suggestedDomain ? `${local}@${suggestedDomain}` : undefined;
  if (suggestedEmail) reasons.push(`Possible typo in the domain: did you mean ${suggestedEmail}?`);

  const valid = !syntaxError && domainExists && hasMxRecords;
  return {
    email,
    valid,
    isDisposable: disposable !== null,
    isAlias: alias !== null,
    isTypo: suggestedEmail !== undefined,
    isPlusAddressed: plus,
    isPersonalEmail: isPersonalProvider(listed),
    domainExists,
    hasWebsite,
    hasMxRecords,
    reasons: reasons.length > 0 ? reasons : [VALID_REASON],
    ...(suggestedEmail ? { suggestedEmail } : {}),
  };
}

function dnsReasons(domain: string, dns: DomainDns | null, found: { hasMxRecords: boolean; hasWebsite: boolean }): string[] {
  if (!dns) return ['Domain was not looked up because it is not a valid domain name'];
  // When the domain itself cannot be confirmed, that one reason also explains the missing MX and website.
  switch (dns.missing) {
    case 'nxdomain':
      return [`Domain ${domain} does not exist`];
    case 'timeout':
      return [`DNS lookup for ${domain} timed out, so the domain and its MX records could not be confirmed`];
    case 'error':
      return [`DNS lookup for ${domain} failed, so the domain and its MX records could not be confirmed`];
  }
  const out: string[] = [];
  if (!found.hasMxRecords) out.push(mxReason(domain, dns));
  if (!found.hasWebsite) {
    out.push(dns.address === 'timeout' ? `Website lookup (A/AAAA) for ${domain} timed out` : `Domain ${domain} has no website (no A or AAAA record)`);
  }
  return out;
}

function mxReason(domain: string, dns: DomainDns): string {
  if (dns.mx.nullMx) return `Domain ${domain} does not accept email (null MX record)`;
  if (dns.mx.outcome === 'timeout') return `MX lookup for ${domain} timed out`;
  if (dns.mx.outcome === 'error') return `MX lookup for ${domain} failed`;
  return `Domain ${domain} has no MX records, so it cannot receive email`;
}
