import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { SLOT_MS } from '../analytics/outcome-rollups.ts';

/**
 * Bounce and complaint rates of a project (decisions.md § 10), from the email-outcome summary
 * (email_outcome_slots: per project and UTC quarter hour, the emails sent, bounced and complained
 * then; kept by the statements of emails/lifecycle.ts). An email counts as sent once the relay took
 * it or refused the recipient; bounces are hard bounces, complaints any email with a complaint.
 * Each outcome is counted in the quarter hour it happened; the 7-day window is the quarter hours
 * from the one holding `now − 7 days`. A window only gets a level from MIN_VOLUME sent emails up;
 * below that its rate is reported but never alarming.
 *
 * The summary, not the emails: emails are never deleted (retention only clears contents), and
 * counting them read every email of the project (~0.6 s at 1,000,000), on every page view and
 * every hard bounce. The summary holds at most 96 rows a day of activity, however much was sent.
 */

export const MIN_VOLUME = 100;
export const WINDOW_DAYS = 7;

export type Level = 'ok' | 'warning' | 'critical';

/** Thresholds in percent. */
export const THRESHOLDS = {
  bounce: { last7Days: { warning: 5, critical: 10 }, allTime: { warning: 4, critical: 8 } },
  complaint: { last7Days: { warning: 0.075, critical: 0.15 }, allTime: { warning: 0.03, critical: 0.12 } },
} as const;

export type Counts = {
  sentLast7Days: number;
  sentAllTime: number;
  bouncedLast7Days: number;
  bouncedAllTime: number;
  complainedLast7Days: number;
  complainedAllTime: number;
};

export type RateReport = { last7Days: number; allTime: number; level: Level };

export type Assessment = {
  bounceRate: RateReport;
  complaintRate: RateReport;
  sentLast7Days: number;
  sentAllTime: number;
  status: Level;
};

/** The first quarter hour of the 7-day window that ends at `now`. */
export const windowStart = (now: Date): Date => new Date(Math.floor((now.getTime() - WINDOW_DAYS * 86_400_000) / SLOT_MS) * SLOT_MS);

export async function countsFor(db: Db, projectId: string, now: Date): Promise<Counts> {
  const recent = sql`slot >= ${windowStart(now).toISOString()}::timestamptz`;
  const { rows } = await db.execute<Counts>(sql`
    SELECT coalesce(sum(sent) FILTER (WHERE ${recent}), 0)::int AS "sentLast7Days",
           coalesce(sum(sent), 0)::int AS "sentAllTime",
           coalesce(sum(bounced) FILTER (WHERE ${recent}), 0)::int AS "bouncedLast7Days",
           coalesce(sum(bounced), 0)::int AS "bouncedAllTime",
           coalesce(sum(complained) FILTER (WHERE ${recent}), 0)::int AS "complainedLast7Days",
           coalesce(sum(complained), 0)::int AS "complainedAllTime"
      FROM email_outcome_slots WHERE project_id = ${projectId}`);
  return rows[0];
}

const percent = (count: number, sent: number) => (sent === 0 ? 0 : Math.round((count / sent) * 100 * 10_000) / 10_000);

/** Exact comparison in integers: count / sent ≥ threshold % (thresholds have at most three decimals). */
const atLeast = (count: number, sent: number, thresholdPercent: number) => count * 100_000 >= Math.round(thresholdPercent * 1000) * sent;

function levelOf(count: number, sent: number, t: { warning: number; critical: number }): Level {
  if (sent < MIN_VOLUME) return 'ok';
  if (atLeast(count, sent, t.critical)) return 'critical';
  if (atLeast(count, sent, t.warning)) return 'warning';
  return 'ok';
}

const RANK: Record<Level, number> = { ok: 0, warning: 1, critical: 2 };
const worst = (...levels: Level[]): Level => levels.reduce((a, b) => (RANK[b] > RANK[a] ? b : a), 'ok');

export function assess(c: Counts): Assessment {
  const rate = (recent: number, all: number, t: (typeof THRESHOLDS)['bounce' | 'complaint']): RateReport => ({
    last7Days: percent(recent, c.sentLast7Days),
    allTime: percent(all, c.sentAllTime),
    level: worst(levelOf(recent, c.sentLast7Days, t.last7Days), levelOf(all, c.sentAllTime, t.allTime)),
  });
  const bounceRate = rate(c.bouncedLast7Days, c.bouncedAllTime, THRESHOLDS.bounce);
  const complaintRate = rate(c.complainedLast7Days, c.complainedAllTime, THRESHOLDS.complaint);
  return {
    bounceRate,
    complaintRate,
    sentLast7Days: c.sentLast7Days,
    sentAllTime: c.sentAllTime,
    status: worst(bounceRate.level, complaintRate.level),
  };
}
