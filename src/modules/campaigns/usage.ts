import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { campaigns } from '../../db/schema/campaigns.ts';
import type { UpcomingItem } from '../activity/upcoming.ts';
import { fromDomainMatchesSql } from '../domains/sender.ts';

/**
 * What campaigns hold, for the usage module (src/modules/usage): segments and domains of active
 * campaigns, fields their conditions reference, and scheduled sends for GET /activity/upcoming.
 */

/** FILTERED campaigns whose condition has a filter on `field` (for a `data.*` field, also one nested under it). */
const conditionUses = (field: string) => {
  const nested = field.startsWith('data.');
  const path = nested ? 'strict $.**.field ? (@ == $f || @ starts with $p)' : 'strict $.**.field ? (@ == $f)';
  return sql`(${campaigns.audienceType} = 'FILTERED' AND ${campaigns.audienceCondition} IS NOT NULL
    AND jsonb_path_exists(${campaigns.audienceCondition}, ${path}::jsonpath, jsonb_build_object('f', ${field}::text, 'p', ${`${field}.`}::text)))`;
};

/** Segment DELETE is refused while a SCHEDULED or SENDING campaign goes to it (its audience, or a `segment.<id>` filter). */
export async function activeCampaignsUsingSegment(db: Db, projectId: string, segmentId: string): Promise<string | null> {
  const rows = await db
    .select({ name: campaigns.name, status: campaigns.status })
    .from(campaigns)
    .where(
      and(
        eq(campaigns.projectId, projectId),
        inArray(campaigns.status, ['SCHEDULED', 'SENDING']),
        sql`(${campaigns.segmentId} = ${segmentId}::uuid OR ${conditionUses(`segment.${segmentId.toLowerCase()}`)})`,
      ),
    )
    .orderBy(asc(campaigns.createdAt))
    .limit(5);
  if (rows.length === 0) return null;
  return `Segment is used by ${rows.map((r) => `${r.status.toLowerCase()} campaign '${r.name}'`).join(', ')}`;
}

/** Campaigns not yet finished (DRAFT, SCHEDULED, SENDING) whose audience condition references the field. */
export async function campaignsUsingField(db: Db, projectId: string, field: string): Promise<{ id: string; name: string }[]> {
  return db
    .select({ id: campaigns.id, name: campaigns.name })
    .from(campaigns)
    .where(and(eq(campaigns.projectId, projectId), inArray(campaigns.status, ['DRAFT', 'SCHEDULED', 'SENDING']), conditionUses(field)))
    .orderBy(asc(campaigns.createdAt), asc(campaigns.id));
}

/** Domain DELETE is refused while a SCHEDULED or SENDING campaign sends from it (or a subdomain). */
export async function activeCampaignUsingDomain(db: Db, projectId: string, domain: string): Promise<string | null> {
  const [row] = await db
    .select({ name: campaigns.name, status: campaigns.status })
    .from(campaigns)
    .where(and(eq(campaigns.projectId, projectId), inArray(campaigns.status, ['SCHEDULED', 'SENDING']), fromDomainMatchesSql(campaigns.fromEmail, domain)))
    .orderBy(asc(campaigns.createdAt))
    .limit(1);
  return row ? `${row.status.toLowerCase()} campaign "${row.name}"` : null;
}

/** Scheduled campaigns, soonest first (an overdue one that has not started yet included). */
export async function upcomingCampaigns(db: Db, projectId: string, opts: { limit: number }): Promise<UpcomingItem[]> {
  const rows = await db
    .select({
      id: campaigns.id,
      name: campaigns.name,
      scheduledFor: campaigns.scheduledFor,
      audienceType: campaigns.audienceType,
      segmentId: campaigns.segmentId,
      totalRecipients: campaigns.totalRecipients,
    })
    .from(campaigns)
    .where(and(eq(campaigns.projectId, projectId), eq(campaigns.status, 'SCHEDULED')))
    .orderBy(asc(campaigns.scheduledFor), asc(campaigns.id))
    .limit(opts.limit);
  return rows.map((r) => ({
    type: 'campaign',
    id: r.id,
    name: r.name,
    scheduledFor: (r.scheduledFor ?? new Date(0)).toISOString(),
    contact: null,
    details: { audienceType: r.audienceType, segmentId: r.segmentId, totalRecipients: r.totalRecipients },
  }));
}
