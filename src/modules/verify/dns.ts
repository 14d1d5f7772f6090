import { Resolver } from 'node:dns/promises';
import type { Clock } from '../../context.ts';

/**
 * MX, A/AAAA and NS lookups for /v1/verify, in parallel, under one deadline, with a small
 * per-domain cache. Each lookup ends in one of these outcomes; a timeout or failure is never
 * mistaken for "no such record".
 */
export type Outcome = 'found' | 'empty' | 'nxdomain' | 'timeout' | 'error';

export type DomainDns = {
  /** Any lookup found records, or the server said the name exists (NOERROR, no data). */
  exists: boolean;
  /** Why the domain does not exist, when it does not. */
  missing: 'nxdomain' | 'timeout' | 'error' | null;
  mx: { outcome: Outcome; exchanges: string[]; nullMx: boolean };
  /** A and AAAA together: found when either has an address. */
  address: Outcome;
  ns: Outcome;
};

export type DnsChecker = {
  lookup: (asciiDomain: string) => Promise<DomainDns>;
  close: () => void;
};

export type DnsCheckerOptions = {
  /** Resolvers in `ip` or `ip:port` form (ctx.dns.getServers(), i.e. DNS_SERVERS or the system's). */
  servers: string[];
  clock: Clock;
  /** Hard limit for one domain's lookups together; whatever has not answered by then is a timeout. */
  budgetMs?: number;
  cacheTtlMs?: number;
  cacheMaxEntries?: number;
};

const TIMEOUT = Symbol('timeout');

export function createDnsChecker(opts: DnsCheckerOptions): DnsChecker {
  const budgetMs = opts.budgetMs ?? 700;
  const ttlMs = opts.cacheTtlMs ?? 5 * 60_000;
  const maxEntries = opts.cacheMaxEntries ?? 5_000;
  // A resolver of our own: the shared one waits seconds per query, far over the one-second answer.
  const resolver = new Resolver({ timeout: Math.max(100, Math.floor(budgetMs / 2)), tries: 2 });
  if (opts.servers.length > 0) resolver.setServers(opts.servers);

  const cache = new Map<string, { expires: number; value: Promise<DomainDns> }>();

  const query = async <T>(run: () => Promise<T[]>, deadline: Promise<typeof TIMEOUT>) => {
    try {
      const result = await Promise.race([run(), deadline]);
      if (result === TIMEOUT) return { outcome: 'timeout' as const, records: [] as T[] };
      return { outcome: result.length > 0 ? ('found' as const) : ('empty' as const), records: result };
    } catch (err) {
      return { outcome: outcomeOf(err), records: [] as T[] };
    }
  };

  const resolve = async (domain: string): Promise<DomainDns> => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<typeof TIMEOUT>((r) => {
      timer = setTimeout(() => r(TIMEOUT), budgetMs);
    });
    try {
      const [mx, a, aaaa, ns] = await Promise.all([
        query(() => resolver.resolveMx(domain), deadline),
        query(() => resolver.resolve4(domain), deadline),
        query(() => resolver.resolve6(domain), deadline),
        query(() => resolver.resolveNs(domain), deadline),
      ]);
      return summarise(mx, mergeAddress(a.outcome, aaaa.outcome), ns.outcome);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    lookup(domain) {
      const now = opts.clock.now().getTime();
      const hit = cache.get(domain);
      if (hit && hit.expires > now) return hit.value;
      if (hit) cache.delete(domain);
      const value = resolve(domain);
      cache.set(domain, { expires: now + ttlMs, value });
      // A timeout or server failure says nothing about the domain: do not remember it.
      void value.then((r) => {
        if (isTransient(r) && cache.get(domain)?.value === value) cache.delete(domain);
      });
      while (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
      return value;
    },
    close: () => resolver.cancel(),
  };
}

function outcomeOf(err: unknown): Outcome {
  switch ((err as { code?: string }).code) {
    case 'ENODATA':
      return 'empty';
    case 'ENOTFOUND':
      return 'nxdomain';
    case 'ETIMEOUT':
      return 'timeout';
    default:
      return 'error';
  }
}

/** The better of the A and AAAA answers: an address on either family is a website. */
function mergeAddress(a: Outcome, aaaa: Outcome): Outcome {
  const rank: Outcome[] = ['found', 'empty', 'nxdomain', 'timeout', 'error'];
  return rank[Math.min(rank.indexOf(a), rank.indexOf(aaaa))];
}

function summarise(mx: { outcome: Outcome; records: { exchange: string; priority: number }[] }, address: Outcome, ns: Outcome): DomainDns {
  const outcomes = [mx.outcome, address, ns];
  const exists = outcomes.some((o) => o === 'found' || o === 'empty');
  let missing: DomainDns['missing'] = null;
  if (!exists) {
    if (outcomes.includes('nxdomain')) missing = 'nxdomain';
    else if (outcomes.includes('timeout')) missing = 'timeout';
    else missing = 'error';
  }
  const exchanges = mx.records.toSorted((x, y) => x.priority - y.priority).map((r) => r.exchange.replace(/\.$/, ''));
  // RFC 7505 null MX: a single record with an empty exchange says "this domain takes no mail".
  const nullMx = exchanges.length === 1 && exchanges[0] === '';
  return { exists, missing, mx: { outcome: mx.outcome, exchanges, nullMx }, address, ns };
}

function isTransient(r: DomainDns): boolean {
  const outcomes = [r.mx.outcome, r.address, r.ns];
  return outcomes.includes('timeout') || outcomes.includes('error');
}
