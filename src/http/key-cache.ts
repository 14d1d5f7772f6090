import pg from 'pg';
import type { Logger } from 'pino';
import type { Database } from '../db/client.ts';

export type KeyOwner = {
  projectId: string;
  keyType: 'secret' | 'public';
  disabled: boolean;
  disabledReason: string | null;
};

const CHANNEL = 'herald_project_changed';
const TTL_MS = 60_000;

/**
 * API keys resolved to projects, cached in memory. Every process LISTENs on one channel, so a key
 * rotation or a project disable in any process evicts the entry everywhere at once; the TTL bounds
 * staleness if a notification is ever missed (for example during a reconnect).
 */
export type KeyCache = {
  resolve: (key: string) => Promise<KeyOwner | null>;
  /** Call inside (or right after) the transaction that changed a project's keys or state. */
  notifyChanged: (projectId: string, client?: pg.PoolClient) => Promise<void>;
  close: () => Promise<void>;
};

export async function createKeyCache(database: Database, url: string, log: Logger): Promise<KeyCache> {
  const entries = new Map<string, KeyOwner & { at: number }>();
  const evictProject = (projectId: string) => {
    for (const [key, owner] of entries) if (owner.projectId === projectId) entries.delete(key);
  };

  let listener: pg.Client | null = null;
  let closed = false;
  const listen = async () => {
    const client = new pg.Client({ connectionString: url, application_name: 'herald-key-cache' });
    client.on('notification', (msg) => msg.payload && evictProject(msg.payload));
    client.on('error', (err) => {
      log.warn({ err }, 'key cache listener lost; reconnecting');
      entries.clear();
      listener = null;
      if (!closed) setTimeout(() => void listen().catch(() => {}), 1000).unref();
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    listener = client;
  };
  await listen();

  return {
    resolve: async (key) => {
      const hit = entries.get(key);
      if (hit && Date.now() - hit.at < TTL_MS) return hit;
      const { rows } = await database.pool.query<{ id: string; disabled: boolean; disabled_reason: string | null; is_public: boolean }>(
        `SELECT id, disabled, disabled_reason, public_key = $1 AS is_public
           FROM projects WHERE secret_key = $1 OR public_key = $1 LIMIT 1`,
        [key],
      );
      if (rows.length === 0) return null;
      const owner = {
        projectId: rows[0].id,
        keyType: rows[0].is_public ? ('public' as const) : ('secret' as const),
        disabled: rows[0].disabled,
        disabledReason: rows[0].disabled_reason,
        at: Date.now(),
      };
      entries.set(key, owner);
      return owner;
    },
    notifyChanged: async (projectId, client) => {
      evictProject(projectId);
      await (client ?? database.pool).query('SELECT pg_notify($1, $2)', [CHANNEL, projectId]);
    },
    close: async () => {
      closed = true;
      await listener?.end().catch(() => {});
    },
  };
}
