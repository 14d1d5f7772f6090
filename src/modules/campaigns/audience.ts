import { type SQL, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { isStatementTimeout, withStatementTimeout } from '../../db/statement-timeout.ts';
import type { AudienceType } from '../../db/schema/campaigns.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { compileCondition, parseCondition, validateCondition } from '../../conditions/index.ts';
import { requestConditionRead, withConditionTimeout } from '../../conditions/time-bound.ts';
import { ApiError, validationError } from '../../http/errors.ts';
import { getSegment, segmentMembershipSql } from '../segments/service.ts';
import { customFieldTypes } from '../contacts/fields.ts';
import { QUICK_AUDIENCE_MS, takeAudienceTurn } from './turns.ts';

/**
 * Who a campaign goes to. The audience rule (ALL, a segment, or a condition tree) comes from the
 * segments and conditions modules as a SQL boolean over `contacts AS c`; this file adds the sending
 * rules (decisions.md § 5, 6): MARKETING/HEADLESS only to subscribed contacts, suppressed addresses
 * never. Ineligible contacts are selected out here rather than recorded as SKIPPED emails.
 */

export type Audience = {
  audienceType: AudienceType;
  segmentId: string | null;
  audienceCondition: unknown;
  type: EmailType;
};

/** The audience fields as stored: only the one the type uses is kept. */
export type StoredAudience = Pick<Audience, 'audienceType' | 'segmentId' | 'audienceCondition'>;

/**
 * Checks the audience rule (SEGMENT needs a segment of this project, FILTERED a valid condition tree)
 * and returns the fields to store.
 */
/**
 * A segment or a condition given for an audience of another type is a 422 on it: the type decides,
 * and the other was dropped without a word (a PUT of a condition on an ALL campaign answered 200
 * and kept ALL). Null, which the dashboard sends for the fields its type does not use, is fine.
 */
export function assertAudienceFields(audienceType: AudienceType, given: { segmentId?: string | null; audienceCondition?: unknown }): void {
  const misplaced = [
    audienceType !== 'SEGMENT' && given.segmentId != null ? { field: 'segmentId', needs: 'SEGMENT' } : null,
    audienceType !== 'FILTERED' && given.audienceCondition != null ? { field: 'audienceCondition', needs: 'FILTERED' } : null,
  ].filter((m) => m !== null);
  if (misplaced.length === 0) return;
  throw validationError(
    misplaced.map((m) => ({
      field: m.field,
      code: 'custom',
      message: `${m.field} applies when audienceType is ${m.needs}; this campaign's is ${audienceType}`,
    })),
  );
}

export async function checkAudience(
  db: Db,
  projectId: string,
  a: { audienceType: AudienceType; segmentId?: string | null; audienceCondition?: unknown },
): Promise<StoredAudience> {
  switch (a.audienceType) {
    case 'ALL':
      return { audienceType: 'ALL', segmentId: null, audienceCondition: null };
    case 'SEGMENT': {
      if (!a.segmentId) {
        throw validationError([{ field: 'segmentId', code: 'custom', message: 'segmentId is required when audienceType is SEGMENT' }]);
      }
      // 404 SEGMENT_NOT_FOUND for an unknown id or another project's segment.
      await getSegment(db, projectId, a.segmentId);
      return { audienceType: 'SEGMENT', segmentId: a.segmentId, audienceCondition: null };
    }
    case 'FILTERED': {
      if (a.audienceCondition === undefined || a.audienceCondition === null) {
        throw validationError([{ field: 'audienceCondition', code: 'custom', message: 'audienceCondition is required when audienceType is FILTERED' }]);
      }
      // 400 BAD_REQUEST naming the place, field and operator of a bad filter.
      const condition = parseCondition(a.audienceCondition);
      await validateCondition(db, projectId, condition, { types: await customFieldTypes(db, projectId) });
      return { audienceType: 'FILTERED', segmentId: null, audienceCondition: condition };
    }
  }
}

/** The audience rule alone, over `contacts AS c`. */
async function ruleSql(db: Db, projectId: string, a: Audience, now: Date): Promise<SQL> {
  switch (a.audienceType) {
    case 'ALL':
      return sql`true`;
    case 'SEGMENT':
      if (!a.segmentId) return sql`false`;
      return segmentMembershipSql(db, projectId, a.segmentId, now);
    case 'FILTERED':
      return compileCondition(db, projectId, parseCondition(a.audienceCondition), { types: await customFieldTypes(db, projectId), now });
  }
}

/**
 * Every contact the campaign may be sent to, over `contacts AS c`: the audience rule, the
 * subscription rule of its type, never a suppressed address, and (once sending started) only
 * contacts that existed when it started.
 */
export async function eligibleSql(db: Db, projectId: string, a: Audience, opts: { now: Date; createdUpTo?: Date | null }): Promise<SQL> {
  const rule = await ruleSql(db, projectId, a, opts.now);
  const parts: SQL[] = [sql`c.project_id = ${projectId}`, sql`(${rule})`];
  if (a.type !== 'TRANSACTIONAL') parts.push(sql`c.subscribed`);
  parts.push(sql`NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = c.project_id AND s.email = c.email)`);
  if (opts.createdUpTo) parts.push(sql`c.created_at <= ${opts.createdUpTo.toISOString()}::timestamptz`);
  return sql.join(parts, sql` AND `);
}

/** The effective number of recipients now (`totalRecipients`). */
export async function countRecipients(db: Db, projectId: string, a: Audience, now: Date): Promise<number> {
  const where = await eligibleSql(db, projectId, a, { now });
  const { rows } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM contacts AS c WHERE ${where}`);
  return rows[0].n;
}

/**
 * countRecipients for a request that waits for it: in one of the project's heavy-read slots (a 429
 * at once when they are taken), its statements bounded in time (a 400 on the audience past it).
 */
export const countRecipientsInTime = (ctx: Pick<AppContext, 'database' | 'heavyReads'>, projectId: string, a: Audience, now: Date): Promise<number> =>
  requestConditionRead(ctx, projectId, (db) => countRecipients(db, projectId, a, now), 'audience');

/**
 * What the campaign worker read of an audience, why it could not (a message for the user), or
 * `busy`: another audience read of the project holds its turn, or every slow lane of the process
 * is taken (turns.ts), so nothing was read.
 */
export type AudienceRead<T> = { value: T } | { unreadable: string } | { busy: true };

/** What a campaign's chain of jobs knows of its audience: `slow` once a read outran the quick bound (turns.ts), passed on to each successor job. */
export type AudienceSpeed = { slow: boolean };

/**
 * An audience statement of the campaign worker (the scheduled start's count, a fan-out batch), in a
 * transaction of its own, so it never runs while the campaign row is locked, and in the project's
 * turn. It gets QUICK_AUDIENCE_MS; past it (or when `speed` says an earlier read did) it is read in
 * one of the process's slow lanes under the API's condition bound (CONDITION_STATEMENT_MS), and
 * `speed` records it. Unreadable: PostgreSQL cancelled it past that bound, or the rule no longer
 * compiles (a 4xx from the conditions or segments module); any other error is thrown (the job
 * retries it).
 */
export async function readAudienceInTime<T>(
  ctx: Pick<AppContext, 'database' | 'slowAudienceReads'>,
  projectId: string,
  speed: AudienceSpeed,
  work: (db: Db) => Promise<T>,
): Promise<AudienceRead<T>> {
  const read = async (db: Db): Promise<AudienceRead<T>> => ((await takeAudienceTurn(db, projectId)) ? { value: await work(db) } : { busy: true });
  if (!speed.slow) {
    try {
      return await withStatementTimeout(ctx.database, QUICK_AUDIENCE_MS, read);
    } catch (err) {
      if (!isStatementTimeout(err)) return unreadableOrThrow(err);
      speed.slow = true;
    }
  }
  const release = ctx.slowAudienceReads.tryTake();
  if (!release) return { busy: true };
  try {
    return await withConditionTimeout(ctx.database, read, 'audience');
  } catch (err) {
    return unreadableOrThrow(err);
  } finally {
    release();
  }
}

function unreadableOrThrow(err: unknown): { unreadable: string } {
  if (err instanceof ApiError && err.statusCode < 500) return { unreadable: err.message };
  throw err;
}

export type Recipient = { id: string; email: string };

/** Fan-out position: the last contact written, as an exact timestamp string and id. */
export type Cursor = { at: string; id: string } | null;

/**
 * The next `limit` eligible contacts after `cursor` in (created_at, id) order: one range scan of the
 * contacts (project_id, created_at, id) index, no OFFSET, never the whole audience in memory.
 * Contacts that already have an email of this campaign are left out, by one lookup of the
 * (campaign_id, contact_id) index per contact: the `OFFSET 0` keeps the NOT EXISTS a per-row test.
 * Without it the planner turned it into a join with the campaign's emails, planned from statistics
 * that predate the send (as they do mid-campaign), and every batch compared each contact with every
 * email written so far: 0.7 s a batch of 1,000 with 4,000 written.
 */
export async function nextRecipients(
  db: Db,
  campaign: Audience & { id: string; projectId: string; sentAt: Date },
  cursor: Cursor,
  limit: number,
  now: Date,
): Promise<{ recipients: Recipient[]; cursor: Cursor }> {
  const where = await eligibleSql(db, campaign.projectId, campaign, { now, createdUpTo: campaign.sentAt });
  const after = cursor ? sql`AND (c.created_at, c.id) > (${cursor.at}::timestamptz, ${cursor.id})` : sql``;
  const { rows } = await db.execute<{ id: string; email: string; at: string }>(sql`
    SELECT c.id, c.email, to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at
      FROM contacts AS c
     WHERE ${where} ${after}
       AND NOT EXISTS (SELECT 1 FROM emails e WHERE e.campaign_id = ${campaign.id} AND e.contact_id = c.id OFFSET 0)
     ORDER BY c.created_at, c.id
     LIMIT ${limit}`);
  const last = rows.at(-1);
  return { recipients: rows.map((r) => ({ id: r.id, email: r.email })), cursor: last ? { at: last.at, id: last.id } : cursor };
}
