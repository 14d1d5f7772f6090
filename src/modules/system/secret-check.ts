import { createHmac } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { domains } from '../../db/schema/domains.ts';
import { installation } from '../../db/schema/installation.ts';
import { secretMatchesStoredKeys } from '../domains/secret-check.ts';

/**
 * Whether this process runs with the installation's JWT_SECRET. Every process must share it: it
 * encrypts the DKIM keys, keys the API-key hashes and signs sessions and links. The database keeps
 * an HMAC of it (table `installation`, never the secret), so a mismatch shows even before the first
 * domain exists, and GET /health reports it.
 */
export type SecretCheck = 'ok' | 'mismatch';

/** What a process with another secret gets wrong, for the start-up line. */
export type SecretMismatch = { against: 'dkim-keys' | 'installation' };

export const secretFingerprint = (secret: string) => createHmac('sha256', secret).update('herald secret check v1').digest('base64url');

/**
 * At start-up: the stored DKIM keys decide when there are any (a secret that decrypts them is
 * recorded as the installation's, replacing a stale record); before the first domain, the first
 * process records its secret and later ones must match it. Null when this process's secret is right.
 */
export async function checkSecretAtStartup(database: Database, secret: string): Promise<SecretMismatch | null> {
  const fingerprint = secretFingerprint(secret);
  const hasKeys = (await database.db.select({ id: domains.id }).from(domains).limit(1)).length > 0;
  if (hasKeys) {
    if (!(await secretMatchesStoredKeys(database, secret))) return { against: 'dkim-keys' };
    await database.db
      .insert(installation)
      .values({ id: 1, secretCheck: fingerprint })
      .onConflictDoUpdate({
        target: installation.id,
        set: { secretCheck: fingerprint, updatedAt: sql`now()` },
        setWhere: sql`${installation.secretCheck} <> ${fingerprint}`,
      });
    return null;
  }
  await database.db.insert(installation).values({ id: 1, secretCheck: fingerprint }).onConflictDoNothing();
  return (await storedFingerprint(database)) === fingerprint ? null : { against: 'installation' };
}

async function storedFingerprint(database: Database): Promise<string | null> {
  const [row] = await database.db.select({ f: installation.secretCheck }).from(installation).where(eq(installation.id, 1));
  return row?.f ?? null;
}

/**
 * For GET /health: one primary-key read. 'ok' also when nothing is recorded yet (a process that
 * started before this check existed records it at its next start).
 */
export async function currentSecretCheck(database: Database, secret: string): Promise<SecretCheck> {
  const stored = await storedFingerprint(database);
  return stored === null || stored === secretFingerprint(secret) ? 'ok' : 'mismatch';
}
