import { and, eq, isNotNull, isNull, lt, notInArray, or, sql } from 'drizzle-orm';
import { equalsAny } from '../../db/any.ts';
import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { type EmailStatus, emails } from '../../db/schema/emails.ts';
import { OUTCOME_ROLLUP_CTES, addOutcomes } from '../analytics/outcome-rollups.ts';
import { eventsWithStatement, recordEvent, recordEvents, recordEventsWith } from '../events/record.ts';

/**
 * The life of an email, and the only place that writes `emails` after it is queued
 * (queue.ts inserts it QUEUED or SUPPRESSED). Every status change, the event it emits and the
 * predicates stats and reputation count with are here:
 *
 *   QUEUED ──claim──▶ SENDING ──accepted──▶ SENT ──delivery notice──▶ DELIVERED
 *     ▲                  │ └──temporary failure──▶ QUEUED (retry)       │
 *     │                  └──not sent──▶ FAILED | SKIPPED | SUPPRESSED    │
 *     └── campaign cancelled / project stopped: QUEUED ▶ SKIPPED | FAILED │
 *   SENDING | SENT | DELIVERED ──permanent bounce──▶ BOUNCED              │
 *   SENT | DELIVERED ──complaint──▶ COMPLAINED ◀───────────────────────────┘
 *   opens and clicks only count (openCount/clickCount, openedAt/clickedAt), any status.
 *
 * Events: accepted → email.sent (+ email.delivered when captured); delivered → email.delivered;
 * FAILED → email.failed; bounce → email.bounced; complaint → email.complained; open →
 * email.opened; click → email.clicked (and email.opened for the first open). All go through the
 * event writer (events/record.ts). What a bounce or complaint causes beyond the email itself
 * (suppression, unsubscribe, reputation) is in suppressions/feedback.ts. The number of emails per
 * status (email_counts, GET /emails' `total`) follows every insert, update and delete of `emails`
 * by trigger (migration 0018).
 */

export type EmailRow = typeof emails.$inferSelect;

/** The data every email.* event carries. */
export function emailEventData(email: EmailRow, subject: string | null, extra: Record<string, unknown> = {}) {
  const data: Record<string, unknown> = { emailId: email.id, subject: subject ?? email.subject ?? email.subjectSource };
  if (email.campaignId) data.campaignId = email.campaignId;
  if (email.templateId) data.templateId = email.templateId;
  if (email.workflowId) data.workflowId = email.workflowId;
  return { ...data, ...extra };
}

// ── Delivery ──

/**
 * A claim's lease. The worker holding claims renews them every CLAIM_RENEW_MS while it works on
 * them (renewClaims), so only a dead worker's claims run out, and they run out quickly.
 */
const LEASE = sql`now() + interval '30 seconds'`;
export const CLAIM_RENEW_MS = 10_000;

const expired = and(eq(emails.status, 'SENDING'), lt(emails.lockedUntil, sql`now()`));

/**
 * Waiting for delivery: QUEUED, or SENDING by a worker whose lease expired (it died mid-send)
 * before it handed the message to the relay.
 */
const deliverable = or(eq(emails.status, 'QUEUED'), and(expired, isNull(emails.handedOffAt)));

/** Handed to the relay by a worker that died before recording the relay's answer: treated as sent. */
const handedOffAndOrphaned = and(expired, isNotNull(emails.handedOffAt));

/** Of these emails, the ones still waiting for delivery or orphaned after a hand-off, with their project; nothing is claimed. */
export async function peekEmails(ctx: AppContext, ids: string[]): Promise<{ id: string; projectId: string; handedOff: boolean }[]> {
  if (ids.length === 0) return [];
  return ctx.database.db
    .select({ id: emails.id, projectId: emails.projectId, handedOff: sql<boolean>`${emails.handedOffAt} IS NOT NULL` })
    .from(emails)
    .where(and(equalsAny(emails.id, ids, 'uuid'), or(deliverable, handedOffAndOrphaned)));
}

/**
 * Check-and-set QUEUED → SENDING before any SMTP traffic: of two runs of the same job only one
 * gets a row, so a job that runs twice never delivers twice. One statement for the whole batch.
 */
export async function claimEmails(ctx: AppContext, ids: string[]): Promise<EmailRow[]> {
  if (ids.length === 0) return [];
  return ctx.database.db
    .update(emails)
    .set({ status: 'SENDING', attempts: sql`${emails.attempts} + 1`, lockedUntil: LEASE, updatedAt: sql`now()` })
    .where(and(equalsAny(emails.id, ids, 'uuid'), deliverable))
    .returning();
}

/** Extends the leases of claims this worker still works on (a claim already settled or taken over is left alone). */
export async function renewClaims(ctx: AppContext, held: EmailRow[]): Promise<void> {
  if (held.length === 0) return;
  await ctx.database.db
    .update(emails)
    .set({ lockedUntil: LEASE })
    .where(
      and(
        equalsAny(
          emails.id,
          held.map((e) => e.id),
          'uuid',
        ),
        eq(emails.status, 'SENDING'),
        sql`${emails.lockedUntil} >= now()`,
      ),
    );
}

/**
 * Emails whose worker handed them to the relay and died before recording the answer: recorded as
 * sent (the relay most likely accepted them) rather than sent again, with the subject and
 * Message-ID stored at the hand-off.
 */
export async function settleOrphanedHandOffs(ctx: AppContext, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const settled = await withTransaction(ctx.database, async ({ tx }) => {
    const rows = await tx
      .update(emails)
      .set({ status: 'SENT', error: null, lockedUntil: null, sentAt: sql`${emails.handedOffAt}`, updatedAt: ctx.clock.now() })
      .where(and(equalsAny(emails.id, ids, 'uuid'), handedOffAndOrphaned))
      .returning();
    await addOutcomes(
      tx,
      rows.map((r) => ({ projectId: r.projectId, campaignId: r.campaignId, outcome: 'sent', at: r.sentAt! })),
    );
    for (const row of rows) {
      if (!row.contactId) continue;
      await recordEvent(tx, {
        projectId: row.projectId,
        contactId: row.contactId,
        name: 'email.sent',
        data: emailEventData(row, null),
        createdAt: row.handedOffAt ?? ctx.clock.now(),
      });
    }
    return rows.length;
  });
  if (settled > 0) ctx.log.warn({ emails: settled }, 'emails handed to the relay by a worker that stopped were recorded as sent');
  return settled;
}

type NotSent = Extract<EmailStatus, 'FAILED' | 'SKIPPED' | 'SUPPRESSED'>;

/** Ends a claimed email without sending it. FAILED emits email.failed. */
export async function markNotSent(ctx: AppContext, email: EmailRow, status: NotSent, error: string): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    await tx.update(emails).set({ status, error, lockedUntil: null, updatedAt: ctx.clock.now() }).where(eq(emails.id, email.id));
    if (status === 'FAILED' && email.contactId) {
      await recordEvent(tx, {
        projectId: email.projectId,
        contactId: email.contactId,
        name: 'email.failed',
        data: emailEventData(email, null, { error }),
        createdAt: ctx.clock.now(),
      });
    }
  });
}

export type Accepted = { email: EmailRow; raw: Buffer; subject: string; messageId: string; at: Date };

/**
 * The relay (or capture) accepted these messages. Recorded in ONE statement (status, captured
 * source, email.sent/email.delivered events, outcome rollups), so the window in which a crash
 * could leave an accepted message unrecorded — and so re-sent after the claim lease — is one
 * round trip. The delivery engine records the messages its batch has accepted meanwhile together
 * (delivery/accepted.ts).
 */
export async function markAccepted(ctx: AppContext, accepted: Accepted[]): Promise<void> {
  if (accepted.length === 0) return;
  const captured = ctx.mailer.mode === 'capture';
  const input = accepted.map((a, ord) => ({
    ord,
    id: a.email.id,
    subject: a.subject,
    message_id: a.messageId,
    at: a.at.toISOString(),
    data: emailEventData(a.email, a.subject),
    raw: captured ? a.raw.toString('base64') : null,
  }));
  await recordEventsWith(ctx.database.db, RECORD_ACCEPTED_SQL, [JSON.stringify(input), captured, accepted.map((a) => a.email.id)], 2 * accepted.length);
}

/**
 * markAccepted's statement: $1 the accepted messages as a JSON array, $2 whether they were
 * captured (no SMTP_URL: DELIVERED at once, source stored), $3 their ids. The emails are found by
 * primary key (the id array). Where the status test was a plain `e.status = 'SENDING'`, the
 * planner, whose statistics mid-campaign predate the send, also read the partial index of waiting
 * emails, dead entries and all: thousands of entries a statement. Wrapped in IS TRUE, the test
 * cannot use that index.
 */
const RECORD_ACCEPTED_SQL = eventsWithStatement('herald_emails_accepted_v1', {
  withCtes: `input AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb)
          AS i(ord int, id uuid, subject text, message_id text, at timestamptz, data jsonb, raw text)
    ), updated AS (
      UPDATE emails AS e
         SET status = CASE WHEN $2::boolean THEN 'DELIVERED' ELSE 'SENT' END, subject = i.subject, message_id = i.message_id, error = NULL,
             locked_until = NULL, sent_at = i.at, delivered_at = CASE WHEN $2::boolean THEN i.at END, updated_at = i.at
        FROM input AS i
       WHERE e.id = ANY($3::uuid[]) AND e.id = i.id AND (e.status = 'SENDING') IS TRUE
       RETURNING e.id, e.project_id, e.contact_id, e.campaign_id, i.ord, i.at, i.data, i.raw
    ), stored AS (
      INSERT INTO email_raw (email_id, raw)
      SELECT id, decode(raw, 'base64') FROM updated WHERE $2::boolean
      ON CONFLICT DO NOTHING
    ), outcome_changes AS (
      SELECT u.project_id, u.campaign_id, o.outcome, u.at
        FROM updated AS u CROSS JOIN (VALUES ('sent'), ('delivered')) AS o(outcome)
       WHERE o.outcome = 'sent' OR $2::boolean
    ), ${OUTCOME_ROLLUP_CTES}`,
  rows: `
      SELECT u.ord * 2 + ev.ord AS ord, u.project_id, u.contact_id, ev.name, u.data, u.at AS created_at
        FROM updated u
        CROSS JOIN (VALUES (0, 'email.sent'), (1, 'email.delivered')) AS ev(ord, name)
       WHERE u.contact_id IS NOT NULL AND (ev.name = 'email.sent' OR $2::boolean)`,
  params: 3,
});

/** A temporary failure: back to QUEUED with the server's reply; `then` (in the same transaction) queues the retry. */
export async function markForRetry(ctx: AppContext, email: EmailRow, response: string, then: (client: pg.PoolClient) => Promise<void>): Promise<void> {
  await withTransaction(ctx.database, async ({ tx, client }) => {
    await tx
      .update(emails)
      .set({ status: 'QUEUED', error: response, lockedUntil: null, handedOffAt: null, updatedAt: ctx.clock.now() })
      .where(eq(emails.id, email.id));
    await then(client);
  });
}

/**
 * Claimed emails this worker gives back untried (their message was never built, so nothing reached
 * the relay): QUEUED again, the claim's attempt not counted, and `then` (in the same transaction)
 * queues the delivery job of those given back. Only rows this claim still holds change (SENDING,
 * the same attempt, not handed off), so a claim another worker has since taken over stays its own.
 */
export async function releaseClaims(ctx: AppContext, claimed: EmailRow[], then: (client: pg.PoolClient, ids: string[]) => Promise<void>): Promise<string[]> {
  if (claimed.length === 0) return [];
  const ids = sql.param(claimed.map((e) => e.id));
  const attempts = sql.param(claimed.map((e) => e.attempts));
  return withTransaction(ctx.database, async ({ tx, client }) => {
    const released = await tx
      .update(emails)
      .set({ status: 'QUEUED', attempts: sql`${emails.attempts} - 1`, lockedUntil: null, updatedAt: ctx.clock.now() })
      .where(
        and(
          sql`(${emails.id}, ${emails.attempts}) IN (SELECT * FROM unnest(${ids}::uuid[], ${attempts}::int[]))`,
          eq(emails.status, 'SENDING'),
          isNull(emails.handedOffAt),
        ),
      )
      .returning({ id: emails.id });
    const releasedIds = released.map((r) => r.id);
    if (releasedIds.length > 0) await then(client, releasedIds);
    return releasedIds;
  });
}

/** SENT → DELIVERED with `email.delivered`, once (an email still SENDING is left to its worker). */
export async function markDelivered(ctx: AppContext, email: EmailRow, at: Date): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    const changed = await tx
      .update(emails)
      .set({ status: 'DELIVERED', deliveredAt: at, updatedAt: ctx.clock.now() })
      .where(and(eq(emails.id, email.id), eq(emails.status, 'SENT')))
      .returning({ id: emails.id });
    if (changed.length > 0) await addOutcomes(tx, [{ projectId: email.projectId, campaignId: email.campaignId, outcome: 'delivered', at }]);
    if (changed.length > 0 && email.contactId) {
      await recordEvent(tx, {
        projectId: email.projectId,
        contactId: email.contactId,
        name: 'email.delivered',
        data: emailEventData(email, null),
        createdAt: at,
      });
    }
  });
}

// ── Feedback: bounces and complaints (their consequences: suppressions/feedback.ts) ──

/**
 * A permanent bounce: BOUNCED with `email.bounced`, once per email (not after a bounce or a
 * complaint). In the caller's transaction. Returns the email's subject, or false when it was
 * already bounced or complained.
 */
export async function markBounced(
  tx: Db,
  email: EmailRow,
  b: { at: Date; now: Date; diagnostic: string | null; subject?: string | null; data: (subject: string | null) => Record<string, unknown> },
): Promise<{ subject: string | null } | false> {
  const [row] = await tx
    .update(emails)
    .set({
      status: 'BOUNCED',
      error: b.diagnostic,
      bouncedAt: b.at,
      lockedUntil: null,
      subject: b.subject !== undefined ? b.subject : sql`${emails.subject}`,
      updatedAt: b.now,
    })
    .where(and(eq(emails.id, email.id), notInArray(emails.status, ['BOUNCED', 'COMPLAINED'])))
    .returning({ subject: emails.subject, sentAt: emails.sentAt });
  if (!row) return false;
  const change = { projectId: email.projectId, campaignId: email.campaignId, at: b.at };
  // A message the relay refused at once was sent (and bounced) at its bounce time: campaigns/stats.ts.
  await addOutcomes(tx, [{ ...change, outcome: 'bounced' }, ...(row.sentAt ? [] : [{ ...change, outcome: 'sent' as const }])]);
  if (email.contactId) {
    await recordEvent(tx, { projectId: email.projectId, contactId: email.contactId, name: 'email.bounced', data: b.data(row.subject), createdAt: b.at });
  }
  return { subject: row.subject };
}

/** A transient bounce changes nothing on the email: only `email.bounced`. */
export async function noteTransientBounce(db: Db, email: EmailRow, at: Date, data: Record<string, unknown>): Promise<void> {
  if (!email.contactId) return;
  await recordEvent(db, { projectId: email.projectId, contactId: email.contactId, name: 'email.bounced', data, createdAt: at });
}

/**
 * A complaint: COMPLAINED when the email had been sent or delivered (`complainedAt` in any case)
 * with `email.complained`, once per email. In the caller's transaction; false when already counted.
 */
export async function markComplained(tx: Db, email: EmailRow, c: { at: Date; now: Date; details?: Record<string, unknown> }): Promise<boolean> {
  const [row] = await tx
    .update(emails)
    .set({
      status: sql`CASE WHEN ${emails.status} IN ('SENT', 'DELIVERED') THEN 'COMPLAINED' ELSE ${emails.status} END`,
      complainedAt: c.at,
      updatedAt: c.now,
    })
    .where(and(eq(emails.id, email.id), isNull(emails.complainedAt)))
    .returning({ id: emails.id });
  if (!row) return false;
  await addOutcomes(tx, [{ projectId: email.projectId, campaignId: email.campaignId, outcome: 'complained', at: c.at }]);
  if (email.contactId) {
    await recordEvent(tx, {
      projectId: email.projectId,
      contactId: email.contactId,
      name: 'email.complained',
      data: emailEventData(email, null, { ...c.details }),
      createdAt: c.at,
    });
  }
  return true;
}

// ── Engagement ──

/**
 * Counts `n` more opens or clicks; the first one also sets its time (`column`) to `at`, which the
 * outcome summaries then count. Two statements only when it is not the first: the row lock of the
 * first makes two concurrent first opens count once.
 */
async function countEngagement(tx: Db, emailId: string, column: 'opened' | 'clicked', at: Date, n: number): Promise<EmailRow | null> {
  const [time, count] = column === 'opened' ? [emails.openedAt, emails.openCount] : [emails.clickedAt, emails.clickCount];
  const bump = { [column === 'opened' ? 'openCount' : 'clickCount']: sql`${count} + ${n}::int` };
  const [first] = await tx
    .update(emails)
    .set({ ...bump, [column === 'opened' ? 'openedAt' : 'clickedAt']: at })
    .where(and(eq(emails.id, emailId), isNull(time)))
    .returning();
  if (first) {
    await addOutcomes(tx, [{ projectId: first.projectId, campaignId: first.campaignId, outcome: column, at }]);
    return first;
  }
  const [again] = await tx.update(emails).set(bump).where(eq(emails.id, emailId)).returning();
  return again ?? null;
}

const earliest = (times: Date[]): Date => times.reduce((a, b) => (b < a ? b : a));

/**
 * Opens of one email, at least one (tracking/engagement.ts writes those that arrive together at
 * once): `openCount` up by as many, the first `openedAt` kept, an `email.opened` for each. False
 * when the email does not exist (any more).
 */
export async function markOpened(ctx: AppContext, emailId: string, ats: Date[]): Promise<boolean> {
  return withTransaction(ctx.database, async ({ tx }) => {
    const row = await countEngagement(tx, emailId, 'opened', earliest(ats), ats.length);
    if (!row) return false;
    const { contactId } = row;
    if (contactId) {
      const data = emailEventData(row, null);
      await recordEvents(
        tx,
        ats.map((at) => ({ projectId: row.projectId, contactId, name: 'email.opened', data, createdAt: at })),
      );
    }
    return true;
  });
}

/** Clicks of one email, at least one: an `email.clicked` each (and `email.opened`, the first open, when none was seen). */
export async function markClicked(ctx: AppContext, emailId: string, clicks: { link: string; at: Date }[]): Promise<boolean> {
  const at = earliest(clicks.map((c) => c.at));
  return withTransaction(ctx.database, async ({ tx }) => {
    const firstOpen = await tx
      .update(emails)
      .set({ openedAt: at, openCount: sql`greatest(${emails.openCount}, 1)` })
      .where(and(eq(emails.id, emailId), isNull(emails.openedAt)))
      .returning({ projectId: emails.projectId, campaignId: emails.campaignId });
    await addOutcomes(
      tx,
      firstOpen.map((r) => ({ ...r, outcome: 'opened', at })),
    );
    const row = await countEngagement(tx, emailId, 'clicked', at, clicks.length);
    if (!row) return false;
    if (row.contactId) {
      const base = { projectId: row.projectId, contactId: row.contactId };
      await recordEvents(tx, [
        ...(firstOpen.length > 0 ? [{ ...base, name: 'email.opened', data: emailEventData(row, null), createdAt: at }] : []),
        ...clicks.map((c) => ({ ...base, name: 'email.clicked', data: emailEventData(row, null, { link: c.link }), createdAt: c.at })),
      ]);
    }
    return true;
  });
}

// ── Stopping what has not been sent ──

/** A cancelled campaign: its QUEUED emails become SKIPPED with `error` (emails being sent finish). In the caller's transaction. */
export async function skipQueuedOfCampaign(tx: Db, campaignId: string, error: string, now: Date): Promise<void> {
  await tx
    .update(emails)
    .set({ status: 'SKIPPED', error, updatedAt: now })
    .where(and(eq(emails.campaignId, campaignId), eq(emails.status, 'QUEUED')));
}

/** A project stopped for its reputation: every QUEUED email FAILED with `error`. In the caller's transaction; returns how many. */
export async function failQueuedOfProject(tx: Db, projectId: string, error: string, now: Date): Promise<number> {
  const failed = await tx
    .update(emails)
    .set({ status: 'FAILED', error, lockedUntil: null, updatedAt: now })
    .where(and(eq(emails.projectId, projectId), eq(emails.status, 'QUEUED')))
    .returning({ id: emails.id });
  return failed.length;
}
