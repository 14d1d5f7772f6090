import { LruCache } from '../render/lru.ts';

/**
 * A small TTL cache keyed `<projectId>|<rest>`, bounded in size (least recently used goes first).
 * Entries of a project are evicted together (`evictProject`), which every process does when any
 * process announces a change of that project (http/key-cache.ts, LISTEN/NOTIFY); the TTL only
 * bounds staleness if a notification is ever missed. Nothing else is kept per project: an index of
 * each project's keys outlived the entries the LRU evicted, one set for every project ever cached.
 */
export class TtlCache<V> {
  private readonly entries: LruCache<string, { value: V; until: number }>;
  private readonly ttlMs: number;

  constructor(opts: { ttlMs: number; max: number }) {
    this.entries = new LruCache(opts.max);
    this.ttlMs = opts.ttlMs;
  }

  private readonly loading = new Map<string, Promise<V>>();

  get(projectId: string, key: string): V | undefined {
    const hit = this.entries.get(`${projectId}|${key}`);
    return hit && hit.until > Date.now() ? hit.value : undefined;
  }

  /**
   * The cached value, or `load`'s, stored. Concurrent misses of one key share one `load`: when an
   * entry expired under load, every request arriving meanwhile ran its own query, and the queries
   * together held up the requests' transactions (bench send's stalls every 5-10 s).
   */
  async getOrLoad(projectId: string, key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.get(projectId, key);
    if (hit !== undefined) return hit;
    const full = `${projectId}|${key}`;
    const pending = this.loading.get(full);
    if (pending) return pending;
    const started: Promise<V> = load().then((value) => {
      // Not stored when the project was evicted meanwhile (the value may predate the change).
      if (this.loading.get(full) === started) this.set(projectId, key, value);
      return value;
    });
    const forget = () => {
      if (this.loading.get(full) === started) this.loading.delete(full);
    };
    started.then(forget, forget);
    this.loading.set(full, started);
    return started;
  }

  set(projectId: string, key: string, value: V): void {
    const full = `${projectId}|${key}`;
    this.entries.set(full, { value, until: Date.now() + this.ttlMs });
  }

  evictProject(projectId: string): void {
    for (const key of this.loading.keys()) if (key.startsWith(`${projectId}|`)) this.loading.delete(key);
    // A scan of at most `max` keys, on a change of the project (not on a request's path).
    const prefix = `${projectId}|`;
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}

/** What a process caches about projects, built once in runtime.ts and carried on the context. */
export type ProjectCaches = {
  /** Whether the project has a tracked DYNAMIC segment (every contact write asks). */
  trackedSegments: TtlCache<boolean>;
  /** Verified sender domains by address domain, with their decrypted DKIM key (/v1/send and every delivered message ask). */
  senders: TtlCache<SenderDomainEntry>;
  /** Drops everything cached about the project in this process. */
  evictProject: (projectId: string) => void;
};

export type SenderDomainEntry = { id: string; domain: string; dkimSelector: string; dkimPrivateKeyPem: string };

export function createProjectCaches(): ProjectCaches {
  const trackedSegments = new TtlCache<boolean>({ ttlMs: 5_000, max: 10_000 });
  const senders = new TtlCache<SenderDomainEntry>({ ttlMs: 10_000, max: 10_000 });
  return {
    trackedSegments,
    senders,
    evictProject: (projectId) => {
      trackedSegments.evictProject(projectId);
      senders.evictProject(projectId);
    },
  };
}
