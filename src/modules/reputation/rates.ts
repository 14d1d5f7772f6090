import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { countedAs } from '../emails/lifecycle.ts';

/**
 * Bounce and complaint rates of a project (decisions.md § 10), from its stored emails. An email
 * counts as sent once the relay took it or refused the recipient (SENT, DELIVERED, BOUNCED,
 * COMPLAINED); bounces are hard bounces (status BOUNCED), complaints any email with a complaint.
 * The 7-day window is on the email's creation time. A window only gets a level from MIN_VOLUME
 * sent emails up; below that its rate is reported but never alarming.
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

const is = countedAs();

export async function countsFor(db: Db, projectId: string, now: Date): Promise<Counts> {
  const since = new Date(now.getTime() - WINDOW_DAYS * 86_400_000).toISOString();
  const recent = sql`created_at > ${since}::timestamptz`;
  const { rows } = await db.execute<Counts>(sql`
    SELECT count(*) FILTER (WHERE ${is.sent} AND ${recent})::int AS "sentLast7Days",
           count(*) FILTER (WHERE ${is.sent})::int AS "sentAllTime",
           count(*) FILTER (WHERE ${is.bounced} AND ${recent})::int AS "bouncedLast7Days",
           count(*) FILTER (WHERE ${is.bounced})::int AS "bouncedAllTime",
           count(*) FILTER (WHERE ${is.complained} AND ${recent})::int AS "complainedLast7Days",
           count(*) FILTER (WHERE ${is.complained})::int AS "complainedAllTime"
      FROM emails WHERE project_id = ${projectId}`);
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
