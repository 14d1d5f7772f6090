import pg from 'pg';
import type { Logger } from 'pino';
import { eq } from 'drizzle-orm';
import type { Database } from '../db/client.ts';
import { projects } from '../db/schema/users.ts';
import { apiKeyHasher } from './api-keys.ts';
import { listenOn } from '../db/listen.ts';

export type KeyOwner = {
  projectId: string;
  keyType: 'secret' | 'public';
  disabled: boolean;
  disabledReason: string | null;
};

const CHANNEL = 'herald_project_changed';
const TTL_MS = 60_000;
/**
 * Keys cached at most; past it the oldest goes. Without a bound the map kept an entry for every
 * key that was ever used in the process's life, expired or not: one or two for each project.
 */
export const MAX_CACHED_KEYS = 10_000;

/**
 * API keys resolved to projects, cached in memory. Every process LISTENs on one channel, so a key
 * rotation or a project disable in any process evicts the entry everywhere at once; the TTL bounds
 * staleness if a notification is ever missed (for example during a reconnect).
 */
export type KeyCache = {
  resolve: (key: string) => Promise<KeyOwner | null>;
  /**
   * Call inside (or right after) the transaction that changed a project's keys, state, segments,
   * domains or settings: every process evicts what it cached about the project (its keys and
   * `onProjectChanged`, the context's project caches).
   */
  notifyChanged: (projectId: string, client?: pg.PoolClient) => Promise<void>;
  close: () => Promise<void>;
};

export async function createKeyCache(
  database: Database,
  url: string,
  log: Logger,
  jwtSecret: string,
  onProjectChanged: (projectId: string) => void = () => {},
  maxEntries = MAX_CACHED_KEYS,
): Promise<KeyCache> {
  const hash = apiKeyHasher(jwtSecret);
  // Keyed by the key's hash: not even memory holds secret keys longer than a request.
  const entries = new Map<string, KeyOwner & { at: number }>();
  // Counts evictions: a lookup that an eviction overtook (it read the row before a rotation
  // committed, the notification came before its answer) answers once but caches nothing.
  let evictions = 0;
  const evictProject = (projectId: string) => {
    evictions++;
    for (const [key, owner] of entries) if (owner.projectId === projectId) entries.delete(key);
    onProjectChanged(projectId);
  };

  const listening = await listenOn({
    url,
    channel: CHANNEL,
    applicationName: 'herald-key-cache',
    log,
    onPayload: evictProject,
    // Evictions sent while it was away were missed: nothing cached before is trusted.
    onLost: () => {
      evictions++;
      entries.clear();
    },
  });

  return {
    resolve: async (key) => {
      const hashed = hash(key);
      const hit = entries.get(hashed);
      if (hit && Date.now() - hit.at < TTL_MS) return hit;
      const isPublic = key.startsWith('pk_');
      const evictionsBefore = evictions;
      const [row] = await database.db
        .select({ id: projects.id, disabled: projects.disabled, disabledReason: projects.disabledReason })
        .from(projects)
        .where(isPublic ? eq(projects.publicKey, key) : eq(projects.secretKeyHash, hashed));
      if (!row) return null;
      const owner = {
        projectId: row.id,
        keyType: isPublic ? ('public' as const) : ('secret' as const),
        disabled: row.disabled,
        disabledReason: row.disabledReason,
        at: Date.now(),
      };
      if (evictions === evictionsBefore) {
        entries.delete(hashed); // set again at the end of the map's order: the oldest is first
        entries.set(hashed, owner);
        if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
      }
      return owner;
    },
    notifyChanged: async (projectId, client) => {
      evictProject(projectId);
      await (client ?? database.pool).query('SELECT pg_notify($1, $2)', [CHANNEL, projectId]);
    },
    close: () => listening.close(),
  };
}
