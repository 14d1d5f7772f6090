import { domainToASCII } from 'node:url';

/** RFC 5321: the whole path is at most 256 octets including the angle brackets, so 254 for the address. */
export const MAX_EMAIL_LENGTH = 254;

/**
 * The gate in front of /v1/verify: one `@` with something on each side and no whitespace.
 * Anything failing it is "not an email at all" (422); anything passing it gets a verdict (200).
 */
export const LOOSE_EMAIL = /^[^\s@]+@[^\s@]+$/;

export type ParsedAddress = {
  local: string;
  /** The domain as typed, lowercased. */
  domain: string;
  /** The domain in ASCII (punycode) for DNS, or null when it is not a valid host name. */
  asciiDomain: string | null;
  /** Why the address is not a valid mailbox address, or null when it is. */
  syntaxError: string | null;
};

// RFC 5322 dot-atom: atext runs separated by single dots. Quoted local parts are legal but unused
// in practice and rejected by most providers, so they count as invalid here.
const DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const TLD = /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

/** Splits an address that passed LOOSE_EMAIL and checks it strictly. */
export function parseAddress(email: string): ParsedAddress {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const domain = email.slice(at + 1).toLowerCase();
  const domainError = checkDomain(domain);
  const asciiDomain = domainError ? null : domainToASCII(domain);
  return { local, domain, asciiDomain, syntaxError: checkLocal(local) ?? domainError };
}

function checkLocal(local: string): string | null {
  if (local.length > 64) return 'the part before @ is longer than 64 characters';
  if (!DOT_ATOM.test(local)) return 'the part before @ contains invalid characters or misplaced dots';
  return null;
}

function checkDomain(domain: string): string | null {
  if (domain.startsWith('[')) return 'IP address literals are not accepted as a domain';
  const ascii = domainToASCII(domain);
  if (!ascii) return 'the domain is not a valid host name';
  if (ascii.length > 253) return 'the domain is longer than 253 characters';
  const labels = ascii.split('.');
  if (labels.length < 2) return 'the domain has no top-level domain';
  if (!labels.every((l) => LABEL.test(l))) return 'the domain contains an invalid label';
  if (!TLD.test(labels[labels.length - 1])) return 'the top-level domain is not valid';
  return null;
}

/**
 * Suffixes of names that are special-use (RFC 6761, 6762, 7686, 8375, 9476) or used only inside
 * networks: a lookup would go to the system's resolver and tell the asker which internal names
 * exist (`metadata.google.internal`, `printer.local`). `.test` is left out: it has no public
 * answers either, and the test suite's DNS server answers for it.
 */
const INTERNAL_SUFFIXES = ['local', 'internal', 'localhost', 'localdomain', 'lan', 'home', 'corp', 'intranet', 'private', 'arpa', 'onion', 'alt', 'invalid'];

/** The special-use or internal suffix an ASCII domain ends with (`home.arpa` as `arpa`), or null. */
export function internalSuffix(asciiDomain: string): string | null {
  const tld = asciiDomain.slice(asciiDomain.lastIndexOf('.') + 1);
  return INTERNAL_SUFFIXES.includes(tld) ? tld : null;
}
