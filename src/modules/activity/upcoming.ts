import type { Db } from '../../db/client.ts';

/** GET /activity/upcoming: what is scheduled to happen next, soonest first. */

export type UpcomingItem = {
  /** `campaign` (a scheduled campaign send) or `workflow` (a waiting workflow step). */
  type: 'campaign' | 'workflow';
  id: string;
  name: string;
  /** When it is due (ISO 8601). */
  scheduledFor: string;
  contact?: { id: string; email: string } | null;
  /** Anything else the source wants to show: campaign audience, workflow step id, … */
  details?: Record<string, unknown>;
};

/**
 * Campaigns (scheduled sends) and workflows (waiting executions) register a provider here, one
 * import and one entry. Each returns its own soonest `limit` items due at or after `now`.
 */
export type UpcomingProvider = (db: Db, projectId: string, opts: { limit: number; now: Date }) => Promise<UpcomingItem[]>;

export const upcomingProviders: UpcomingProvider[] = [];

export async function listUpcoming(db: Db, projectId: string, opts: { limit: number; now: Date }): Promise<{ data: UpcomingItem[] }> {
  const parts = await Promise.all(upcomingProviders.map((p) => p(db, projectId, opts)));
  const data = parts
    .flat()
    .sort((a, b) => Date.parse(a.scheduledFor) - Date.parse(b.scheduledFor) || a.id.localeCompare(b.id))
    .slice(0, opts.limit);
  return { data };
}
