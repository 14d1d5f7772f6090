import { desc } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { domains } from '../../db/schema/domains.ts';
import { decryptPrivateKey } from './dkim-keys.ts';

/**
 * Whether `secret` (JWT_SECRET) decrypts the DKIM keys stored in this database. A process with
 * another secret (say a worker on a second host that generated its own) could not sign any mail.
 * True when no domain exists yet.
 */
export async function secretMatchesStoredKeys(database: Database, secret: string): Promise<boolean> {
  const [row] = await database.db.select({ enc: domains.dkimPrivateKeyEnc }).from(domains).orderBy(desc(domains.createdAt)).limit(1);
  if (!row) return true;
  try {
    decryptPrivateKey(row.enc, secret);
    return true;
  } catch {
    return false;
  }
}
