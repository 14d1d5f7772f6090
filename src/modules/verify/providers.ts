import { run as suggestDomain } from '@zootools/email-spell-checker';
import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';

/**
 * Domain classification from shipped lists only: no network at run time. The disposable list comes
 * from `disposable-email-domains-js` (updated with the dependency); the two short lists below are
 * curated here because no maintained package separates them from disposable providers.
 */

const DISPOSABLE: ReadonlySet<string> = disposableEmailBlocklistSet();

/** Consumer mailbox providers (free or paid personal mail, not a company's own domain). */
export const PERSONAL_PROVIDERS: readonly string[] = [
  'gmail.com',
  'googlemail.com',
  'outlook.com',
  'outlook.fr',
  'outlook.de',
  'outlook.es',
  'outlook.it',
  'hotmail.com',
  'hotmail.co.uk',
  'hotmail.fr',
  'hotmail.de',
  'hotmail.it',
  'hotmail.es',
  'live.com',
  'live.co.uk',
  'live.fr',
  'live.de',
  'live.it',
  'msn.com',
  'yahoo.com',
  'yahoo.co.uk',
  'yahoo.fr',
  'yahoo.de',
  'yahoo.it',
  'yahoo.es',
  'yahoo.ca',
  'yahoo.com.au',
  'yahoo.co.in',
  'yahoo.co.jp',
  'yahoo.com.br',
  'ymail.com',
  'rocketmail.com',
  'aol.com',
  'aim.com',
  'icloud.com',
  'me.com',
  'mac.com',
  'protonmail.com',
  'protonmail.ch',
  'proton.me',
  'pm.me',
  'gmx.com',
  'gmx.de',
  'gmx.net',
  'gmx.at',
  'gmx.ch',
  'web.de',
  'mail.com',
  'zoho.com',
  'zohomail.com',
  'yandex.com',
  'yandex.ru',
  'ya.ru',
  'mail.ru',
  'bk.ru',
  'inbox.ru',
  'list.ru',
  'rambler.ru',
  'qq.com',
  '163.com',
  '126.com',
  'sina.com',
  'naver.com',
  'daum.net',
  'hanmail.net',
  'tutanota.com',
  'tutanota.de',
  'tuta.io',
  'tuta.com',
  'fastmail.com',
  'fastmail.fm',
  'hey.com',
  'mailbox.org',
  'posteo.de',
  'seznam.cz',
  'wp.pl',
  'o2.pl',
  'interia.pl',
  'onet.pl',
  'orange.fr',
  'wanadoo.fr',
  'free.fr',
  'sfr.fr',
  'laposte.net',
  'libero.it',
  'virgilio.it',
  't-online.de',
  'freenet.de',
  'btinternet.com',
  'sky.com',
  'virginmedia.com',
  'comcast.net',
  'verizon.net',
  'att.net',
  'sbcglobal.net',
  'bellsouth.net',
  'cox.net',
  'charter.net',
  'earthlink.net',
  'optonline.net',
  'shaw.ca',
  'rogers.com',
  'sympatico.ca',
  'telus.net',
  'bigpond.com',
  'optusnet.com.au',
  'xtra.co.nz',
  'rediffmail.com',
  'uol.com.br',
  'bol.com.br',
  'terra.com.br',
];

/** Forwarding and alias services: real people, but the address hides their mailbox. */
export const ALIAS_SERVICES: readonly string[] = [
  'duck.com',
  'simplelogin.com',
  'simplelogin.co',
  'simplelogin.fr',
  'slmail.me',
  'aleeas.com',
  'silomails.com',
  '8alias.com',
  '8shield.net',
  'anonaddy.com',
  'anonaddy.me',
  'addy.io',
  'addymail.com',
  'relay.firefox.com',
  'mozmail.com',
  'privaterelay.appleid.com',
  'passmail.net',
  'passmail.com',
  'passinbox.com',
  'passfwd.com',
  '33mail.com',
  'burnermail.io',
  'erine.email',
];

const PERSONAL: ReadonlySet<string> = new Set(PERSONAL_PROVIDERS);
const ALIAS: ReadonlySet<string> = new Set(ALIAS_SERVICES);

/** The domain itself or the first parent domain found in `list` (alias and disposable services hand out subdomains). */
function matchWithParents(domain: string, list: ReadonlySet<string>): string | null {
  const labels = domain.split('.');
  for (let i = 0; i <= labels.length - 2; i++) {
    const candidate = labels.slice(i).join('.');
    if (list.has(candidate)) return candidate;
  }
  return null;
}

export const disposableMatch = (domain: string) => matchWithParents(domain, DISPOSABLE);
export const aliasMatch = (domain: string) => matchWithParents(domain, ALIAS);
export const isPersonalProvider = (domain: string) => PERSONAL.has(domain);

/**
 * A likely intended domain for a misspelt one: gmial.com → gmail.com, acme.con → acme.com. Only
 * guesses one edit away count (a swap of two letters is one edit). For a domain that exists, only a
 * guess towards a well-known provider counts (`acme.cm` may be real); when DNS says the domain does
 * not exist (`domainMissing`), a fixed top-level domain counts too.
 */
export function typoSuggestion(local: string, domain: string, domainMissing: boolean): string | null {
  if (PERSONAL.has(domain) || ALIAS.has(domain)) return null;
  const suggestion = suggestDomain({
    email: `${local}@${domain}`,
    domains: [...PERSONAL_PROVIDERS],
    distanceFunction: editDistance,
  });
  if (!suggestion || suggestion.domain === domain || editDistance(domain, suggestion.domain) > 1) return null;
  return domainMissing || PERSONAL.has(suggestion.domain) ? suggestion.domain : null;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}
