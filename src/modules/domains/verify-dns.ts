import type { Resolver } from 'node:dns/promises';
import type { StoredDnsRecord } from '../../db/schema/domains.ts';

/** What one lookup returned: the answers, or `null` when the resolvers gave no definitive answer. */
type Answer = string[] | null;

export type CheckResult = {
  records: StoredDnsRecord[];
  /** Every required record resolved to its value. */
  allRequiredFound: boolean;
  /** A required record is missing according to a definitive answer (not a timeout or server failure). */
  requiredMissing: boolean;
};

// NXDOMAIN and NODATA are answers ("not there"); anything else (timeout, SERVFAIL, refused) is not.
const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);

async function lookup(resolver: Resolver, type: StoredDnsRecord['type'], name: string): Promise<Answer> {
  try {
    switch (type) {
      case 'TXT':
        return (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
      case 'CNAME':
        return await resolver.resolveCname(name);
      case 'MX':
        return (await resolver.resolveMx(name)).map((mx) => `${mx.priority} ${mx.exchange}`);
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code && ABSENT.has(code)) return [];
    return null;
  }
}

const host = (s: string) => s.trim().toLowerCase().replace(/\.$/, '');

/** `k=v; k=v` tags (RFC 6376 § 3.2); whitespace inside values is insignificant for DKIM. */
function tags(value: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of value.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    out.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return out;
}

function dkimMatches(published: string, expected: string): boolean {
  const got = tags(published);
  const want = tags(expected);
  if (got.has('v') && got.get('v') !== 'DKIM1') return false;
  if ((got.get('k') ?? 'rsa').toLowerCase() !== (want.get('k') ?? 'rsa').toLowerCase()) return false;
  return got.get('p') === want.get('p');
}

/** The owner merges our mechanism into their own SPF record, so any SPF record containing it counts. */
function spfMatches(published: string, expected: string): boolean {
  const terms = published.trim().toLowerCase().split(/\s+/);
  if (terms[0] !== 'v=spf1') return false;
  const wanted = expected
    .toLowerCase()
    .split(/\s+/)
    .filter((t) => t !== 'v=spf1' && !/^[-~?+]?all$/.test(t));
  return wanted.every((w) => terms.includes(w) || terms.includes(`+${w}`));
}

/** Any DMARC policy satisfies the recommendation. */
const dmarcMatches = (published: string) => /^v\s*=\s*DMARC1\s*(;|$)/i.test(published.trim());

const normaliseTxt = (s: string) =>
  s
    .trim()
    .replace(/\s*;\s*/g, '; ')
    .replace(/\s+/g, ' ');

export function recordMatches(record: StoredDnsRecord, published: string): boolean {
  if (record.type === 'TXT') {
    switch (record.purpose) {
      case 'dkim':
        return dkimMatches(published, record.value);
      case 'spf':
        return spfMatches(published, record.value);
      case 'dmarc':
        return dmarcMatches(published);
      default:
        return normaliseTxt(published) === normaliseTxt(record.value);
    }
  }
  if (record.type === 'MX') return host(published) === host(`${record.priority ?? 10} ${record.value}`);
  return host(published) === host(record.value);
}

/** Resolves every record through `resolver` (one query per name and type) and reports what was found. */
export async function checkRecords(resolver: Resolver, records: StoredDnsRecord[]): Promise<CheckResult> {
  const answers = new Map<string, Promise<Answer>>();
  const answerFor = (r: StoredDnsRecord) => {
    const key = `${r.type} ${host(r.name)}`;
    let a = answers.get(key);
    if (!a) {
      a = lookup(resolver, r.type, r.name);
      answers.set(key, a);
    }
    return a;
  };
  let allRequiredFound = true;
  let requiredMissing = false;
  const checked = await Promise.all(
    records.map(async (r) => {
      const answer = await answerFor(r);
      const found = answer !== null && answer.some((published) => recordMatches(r, published));
      if (r.required && !found) {
        allRequiredFound = false;
        if (answer !== null) requiredMissing = true;
      }
      return { ...r, found };
    }),
  );
  return { records: checked, allRequiredFound, requiredMissing };
}
