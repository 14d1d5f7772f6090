import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { boundedHeavyRead } from '../../http/heavy-reads.ts';

/**
 * How long PostgreSQL may spend on one statement of a request's read over all of the project's
 * contacts: GET /contacts/fields, …/values and …/usage, and GET /contacts?search=. Coverage reads
 * a bounded sample past COVERAGE_EXACT_UP_TO contacts; the values and the usage count read every
 * contact (about 0.7 and 0.25 s a million), a search counts its matches (0.6 s for 111,112 of a
 * million), so the bound answers a project of tens of millions instead of holding a connection
 * for minutes.
 */
export const CONTACTS_READ_STATEMENT_MS = 10_000;

/**
 * `work` as a heavy read (http/heavy-reads.ts: one of the project's slots and its time, a 429 at
 * once past either), its statements bounded by CONTACTS_READ_STATEMENT_MS: past it, a 503.
 */
export const contactsRead = <T>(ctx: Pick<AppContext, 'database' | 'heavyReads'>, projectId: string, work: (db: Db) => Promise<T>): Promise<T> =>
  boundedHeavyRead(ctx, projectId, { ms: CONTACTS_READ_STATEMENT_MS, what: "Reading this project's contacts" }, work);
