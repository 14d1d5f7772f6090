import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { countedAs } from '../emails/lifecycle.ts';
import type { CampaignStats } from './schemas.ts';

/**
 * Campaign counters, computed from the campaign's emails (the delivery worker, the tracking
 * endpoints and bounce/complaint feedback all write there), so they are never out of step.
 * Each counts emails, so opens and clicks are unique per recipient.
 *
 * - sent: handed to the relay (or captured), including those the relay then bounced;
 * - delivered: confirmed delivered (captured mail, or a delivery notification);
 * - opened / clicked / bounced / complained: emails with that outcome at least once.
 */
export type DeliveryCounts = { sent: number; delivered: number; opened: number; clicked: number; bounced: number; complained: number };

/**
 * When each outcome happened, for counts over time (analytics): the column every writer sets with
 * the state above (sent_at with SENT/DELIVERED, delivered_at with DELIVERED, bounced_at with a hard
 * BOUNCED, …), so a count of non-null timestamps in a range equals the counts here over all time.
 */
export const OUTCOME_TIME = {
  sent: 'sent_at',
  delivered: 'delivered_at',
  opened: 'opened_at',
  clicked: 'clicked_at',
  bounced: 'bounced_at',
  complained: 'complained_at',
} as const satisfies Record<keyof DeliveryCounts, string>;

export const ZERO_COUNTS: DeliveryCounts = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0 };

const is = countedAs('e');
const COUNTS = sql`
  count(*) FILTER (WHERE ${is.sent})::int AS sent,
  count(*) FILTER (WHERE ${is.delivered})::int AS delivered,
  count(*) FILTER (WHERE ${is.opened})::int AS opened,
  count(*) FILTER (WHERE ${is.clicked})::int AS clicked,
  count(*) FILTER (WHERE ${is.bounced})::int AS bounced,
  count(*) FILTER (WHERE ${is.complained})::int AS complained`;

export async function deliveryCounts(db: Db, campaignIds: string[]): Promise<Map<string, DeliveryCounts>> {
  const { rows } = await db.execute<DeliveryCounts & { campaign_id: string }>(sql`
    SELECT e.campaign_id, ${COUNTS}
      FROM emails AS e
     WHERE e.campaign_id = ANY(${sql.param(campaignIds)}::uuid[])
     GROUP BY e.campaign_id`);
  return new Map(rows.map(({ campaign_id, ...counts }) => [campaign_id, counts]));
}

/**
 * Recipients who unsubscribed after receiving the campaign: a `contact.unsubscribed` event of the
 * recipient at or after their email was sent. An event that names the email it came from
 * (`data.emailId`, e.g. from the unsubscribe link) counts only for that email; unsubscribes caused by
 * a bounce or complaint (`data.reason`) are counted as bounces and complaints instead.
 */
async function unsubscribedCount(db: Db, campaignId: string): Promise<number> {
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n
      FROM emails AS e
     WHERE e.campaign_id = ${campaignId}
       AND e.sent_at IS NOT NULL
       AND e.contact_id IS NOT NULL
       AND EXISTS (
         SELECT 1 FROM events AS ev
          WHERE ev.contact_id = e.contact_id
            AND ev.name = 'contact.unsubscribed'
            AND ev.created_at >= e.sent_at
            AND (ev.data IS NULL OR ev.data->>'reason' IS NULL)
            AND (ev.data IS NULL OR ev.data->>'emailId' IS NULL OR ev.data->>'emailId' = e.id::text)
       )`);
  return rows[0].n;
}

const percent = (part: number, whole: number) => (whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 100);

export async function campaignStats(db: Db, campaign: { id: string; totalRecipients: number }): Promise<CampaignStats> {
  const [counts, unsubscribed] = await Promise.all([deliveryCounts(db, [campaign.id]), unsubscribedCount(db, campaign.id)]);
  const c = counts.get(campaign.id) ?? ZERO_COUNTS;
  return {
    totalRecipients: campaign.totalRecipients,
    sentCount: c.sent,
    deliveredCount: c.delivered,
    openedCount: c.opened,
    clickedCount: c.clicked,
    bouncedCount: c.bounced,
    complainedCount: c.complained,
    unsubscribedCount: unsubscribed,
    openRate: percent(c.opened, c.sent),
    clickRate: percent(c.clicked, c.sent),
    bounceRate: percent(c.bounced, c.sent),
    deliveryRate: percent(c.delivered, c.sent),
  };
}
