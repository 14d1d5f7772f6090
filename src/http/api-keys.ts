import { createHmac } from 'node:crypto';
import type { Database } from '../db/client.ts';
import { randomBase62 } from '../db/ids.ts';

/**
 * Secret API keys are stored as a keyed hash only: HMAC-SHA256 under a key derived from
 * JWT_SECRET, so a copy of the database (a backup, a read replica, a SQL injection) yields no
 * usable key, and a lookup is one indexed equality. The full key is shown once, when it is
 * created or rotated; afterwards only its prefix. Public keys are public and stay readable.
 */

const PREFIX_LENGTH = 'sk_'.length + 8;

const hashKey = (jwtSecret: string) => createHmac('sha256', jwtSecret).update('herald api keys v1').digest();

export type ApiKeyHasher = (key: string) => string;

export function apiKeyHasher(jwtSecret: string): ApiKeyHasher {
  const key = hashKey(jwtSecret);
  return (apiKey) => createHmac('sha256', key).update(apiKey).digest('base64url');
}

export const secretKeyPrefix = (secretKey: string) => secretKey.slice(0, PREFIX_LENGTH);

/** A fresh key pair: the secret key in clear (to show once) and what is stored of it. */
export function newProjectKeys(jwtSecret: string) {
  const secretKey = `sk_${randomBase62(48)}`;
  return {
    publicKey: `pk_${randomBase62(48)}`,
    secretKey,
    stored: { secretKeyHash: apiKeyHasher(jwtSecret)(secretKey), secretKeyPrefix: secretKeyPrefix(secretKey) },
  };
}

/**
 * Projects created before keys were hashed still hold `secret_key` in clear: hash it and clear the
 * column (the key keeps working). Run at start-up after migrations; idempotent and safe to run
 * from several processes at once.
 */
export async function hashLegacySecretKeys(database: Database, jwtSecret: string): Promise<number> {
  const hash = apiKeyHasher(jwtSecret);
  let done = 0;
  for (;;) {
    const { rows } = await database.pool.query<{ id: string; secret_key: string }>(
      'SELECT id, secret_key FROM projects WHERE secret_key IS NOT NULL LIMIT 500',
    );
    if (rows.length === 0) return done;
    await database.pool.query(
      `UPDATE projects p SET secret_key_hash = v.hash, secret_key_prefix = v.prefix, secret_key = NULL
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS v(id, key, hash, prefix)
        WHERE p.id = v.id AND p.secret_key = v.key`,
      [rows.map((r) => r.id), rows.map((r) => r.secret_key), rows.map((r) => hash(r.secret_key)), rows.map((r) => secretKeyPrefix(r.secret_key))],
    );
    done += rows.length;
  }
}
