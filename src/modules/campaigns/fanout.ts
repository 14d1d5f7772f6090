import { eq, getTableColumns, sql } from 'drizzle-orm';
import type { Config } from '../../config.ts';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import { DELIVERY_QUEUE } from '../emails/delivery/queue-name.ts';
import { type NewEmail, queueEmails } from '../emails/queue.ts';
import { type AudienceSpeed, type Cursor, nextRecipients, readAudienceInTime } from './audience.ts';
import { stopSendingForAudience } from './audience-stop.ts';
import { withinBillingLimit } from '../billing/limits.ts';
import { cancelSending } from './cancel-sending.ts';

/**
 * Fan-out: writes the campaign's emails batch by batch, walking the audience by keyset. Each batch
 * (emails, their delivery jobs, and the advanced cursor) is one transaction under the campaign row
 * lock, written only from the cursor its recipients were read after, so a crash loses at most an
 * uncommitted batch and a resumed or duplicated job continues exactly after the last committed one.
 *
 * The fan-out keeps at most a window of the campaign's emails waiting for delivery (about five
 * seconds of the project's send rate), rather than queueing the whole audience at once: cancelling
 * stays cheap, and transactional mail of the project never queues behind hours of campaign slots.
 */

const MAX_BATCH = 1000;

export const windowSize = (config: Pick<Config, 'sendRatePerSecond'>) => Math.min(5000, Math.max(50, config.sendRatePerSecond * 5));

/** The campaign's emails still waiting for delivery (QUEUED or SENDING), counted up to `cap`. */
export async function pendingEmails(db: Db, campaignId: string, cap: number): Promise<number> {
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM (
      SELECT 1 FROM emails WHERE campaign_id = ${campaignId} AND status IN ('QUEUED', 'SENDING') LIMIT ${cap}
    ) AS waiting`);
  return rows[0].n;
}

/**
 * `more`: a batch was written and more contacts may follow; `full`: the window is full, or the
 * database's disk is below its floor (db/disk-room.ts), try later;
 * `busy`: another audience read of the project holds its turn (turns.ts), try after it;
 * `done`: every recipient has an email; `stopped`: no longer SENDING; `stale`: this job is not the live one.
 */
export type FanoutStep = 'more' | 'full' | 'busy' | 'done' | 'stopped' | 'stale';

/** The campaign row with its fan-out cursor's timestamp as an exact string (a JS Date would round its microseconds and skip or repeat contacts). */
async function campaignForFanout(db: Db, campaignId: string, opts: { lock: boolean }) {
  const query = db
    .select({
      ...getTableColumns(campaigns),
      cursorAt: sql<string | null>`to_char(${campaigns.fanoutCursorAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
    })
    .from(campaigns)
    .where(eq(campaigns.id, campaignId));
  const [c] = await (opts.lock ? query.for('update') : query);
  return c;
}

type FanoutRow = NonNullable<Awaited<ReturnType<typeof campaignForFanout>>>;

const cursorOf = (c: FanoutRow): Cursor => (c.cursorAt && c.fanoutCursorId ? { at: c.cursorAt, id: c.fanoutCursorId } : null);

const sameCursor = (a: Cursor, b: Cursor) => a?.at === b?.at && a?.id === b?.id;

/** Where the campaign stands for job `jobId`, or null when a batch may be written. */
function stepOf(c: FanoutRow | undefined, jobId: string): FanoutStep | null {
  if (!c || c.sendJobId !== jobId) return 'stale';
  if (c.status !== 'SENDING') return 'stopped';
  if (c.fanoutDone) return 'done';
  return null;
}

/**
 * One batch. Its recipients are read before the row is locked, under the condition bound
 * (audience.ts readAudienceInTime), so a slow audience holds no lock that the watchdog, a cancel or
 * a successor job waits on; the batch is then written under the lock only if the cursor has not
 * moved meanwhile (otherwise it is read again). An audience past the bound stops the campaign
 * (audience-stop.ts); one whose project's turn or a slow lane is not free (turns.ts) is not read.
 */
export async function fanOutBatch(ctx: AppContext, campaignId: string, jobId: string, speed: AudienceSpeed): Promise<FanoutStep> {
  const seen = await campaignForFanout(ctx.database.db, campaignId, { lock: false });
  const early = stepOf(seen, jobId);
  if (early || !seen) return early ?? 'stale';
  // A campaign of a million contacts writes about a gigabyte of emails: below twice the disk's floor it waits, SENDING.
  if (ctx.diskRoom.level() !== 'ok') return 'full';

  const window = windowSize(ctx.config);
  const pending = await pendingEmails(ctx.database.db, campaignId, window);
  if (pending > window / 2) return 'full';
  const limit = Math.min(MAX_BATCH, window - pending);
  const cursor = cursorOf(seen);
  const now = ctx.clock.now();
  const read = await readAudienceInTime(ctx, seen.projectId, speed, (db) => nextRecipients(db, { ...seen, sentAt: seen.sentAt ?? now }, cursor, limit, now));
  if ('unreadable' in read) {
    await stopSendingForAudience(ctx, campaignId, jobId, read.unreadable);
    return 'stopped';
  }
  if ('busy' in read) return 'busy';
  const batch = read.value;

  let queued = false;
  const step = await withTransaction(ctx.database, async (t): Promise<FanoutStep> => {
    const c = await campaignForFanout(t.tx, campaignId, { lock: true });
    const step = stepOf(c, jobId);
    if (step || !c) return step ?? 'stale';
    if (!sameCursor(cursorOf(c), cursor)) return 'more';

    if (!(await withinBillingLimit(ctx, t, c.projectId, 'campaigns', batch.recipients.length))) {
      // The month's campaign allowance ran out since the send started: stop here, like a cancel.
      await cancelSending(t.tx, campaignId, 'campaign stopped: the monthly campaigns limit is reached', now);
      ctx.log.warn({ campaignId, projectId: c.projectId }, 'campaign stopped: monthly campaigns limit reached');
      return 'stopped';
    }
    const from = { email: c.fromEmail, name: c.fromName };
    // The batch's emails share one stored content (the campaign body).
    const content = { bodySource: c.body };
    const createdAt = ctx.clock.now();
    await queueEmails(
      ctx,
      t,
      batch.recipients.map((r): NewEmail => ({
        projectId: c.projectId,
        contactId: r.id,
        to: { email: r.email },
        from,
        replyTo: c.replyTo,
        type: c.type,
        subjectSource: c.subject,
        content,
        campaignId: c.id,
        status: 'QUEUED',
      })),
      createdAt,
    );
    queued = batch.recipients.length > 0;
    const done = batch.recipients.length < limit;
    await t.tx
      .update(campaigns)
      .set({
        fanoutCursorAt: batch.cursor ? sql`${batch.cursor.at}::timestamptz` : null,
        fanoutCursorId: batch.cursor?.id ?? null,
        fanoutDone: done,
        // Every email of the campaign lies in this window (its emails list reads only the window);
        // least/greatest, as batches may come from workers whose clocks differ a little.
        ...(queued
          ? {
              emailsFrom: sql`least(${campaigns.emailsFrom}, ${createdAt.toISOString()}::timestamptz)`,
              emailsUntil: sql`greatest(${campaigns.emailsUntil}, ${createdAt.toISOString()}::timestamptz)`,
            }
          : {}),
        heartbeatAt: sql`now()`,
      })
      .where(eq(campaigns.id, campaignId));
    return done ? 'done' : 'more';
  });
  // The batch's emails are fetched for delivery as it commits (the first of a campaign sent now, say).
  if (queued) ctx.jobs.wake(DELIVERY_QUEUE);
  return step;
}
