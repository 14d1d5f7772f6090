import type { Db } from '../../db/client.ts';
import { usage } from '../usage/service.ts';

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

export async function listUpcoming(db: Db, projectId: string, opts: { limit: number; now: Date }): Promise<{ data: UpcomingItem[] }> {
  const data = (await usage.upcoming(db, projectId, opts))
    .sort((a, b) => Date.parse(a.scheduledFor) - Date.parse(b.scheduledFor) || a.id.localeCompare(b.id))
    .slice(0, opts.limit);
  return { data };
}
