import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { conflict } from '../../http/errors.ts';
import { PurgeStopped, RESET_STEPS, existingTables, runPurge } from './purge.ts';

/**
 * Reset and delete of a project, and what an onboarding checklist needs. Both start by stopping
 * what is pending: campaigns in flight or scheduled are removed first, under the project row lock.
 * The rest goes in short batches (purge.ts).
 */

/** Tables of project data whose deleted rows a reset answers (purge.ts RESET_STEPS empties them, and more). */
const RESET_TABLES = [
  'emails',
  'events',
  'campaigns',
  'segments',
  'workflows',
  'templates',
  'import_jobs',
  'bulk_jobs',
  'idempotency_keys',
  'contacts',
  'contact_fields',
] as const;

/**
 * Stops the project's scheduled and sending campaigns (call inside the transaction that holds the
 * project row lock); how many. Emails not yet handed to a worker go with the emails: newest first
 * in a reset, and a deleted project's are never sent (it is disabled).
 */
export async function stopPendingSends(db: Db, projectId: string): Promise<number> {
  const stopped = await db.execute(sql`DELETE FROM campaigns WHERE project_id = ${projectId} AND status IN ('SCHEDULED', 'SENDING')`);
  return stopped.rowCount ?? 0;
}

export async function lockProject(db: Db, projectId: string): Promise<void> {
  await db.execute(sql`SELECT 1 FROM projects WHERE id = ${projectId} FOR UPDATE`);
}

/**
 * POST /users/@me/projects/:id/reset: deletes contacts, events, emails, campaigns, segments,
 * workflows, templates (with imports, bulk jobs, idempotency records and field definitions); keeps
 * domains, members, keys, settings, suppressions and billing (this month's usage of the deleted
 * emails is carried over, batch by batch). One reset of a project at a time, a few per process
 * (429 past them, before any work). `deleted` counts the rows deleted per table, those written
 * while the reset ran included. A batch held past its bound stops it with a 409 saying what was
 * deleted; asked again, it finishes.
 */
export async function resetProject(ctx: AppContext, projectId: string): Promise<{ success: true; deleted: Record<string, number> }> {
  const release = ctx.projectPurges.take(projectId);
  try {
    const present = await existingTables(ctx.database.db, RESET_TABLES);
    const deleted: Record<string, number> = {};
    deleted.campaigns = await withTransaction(ctx.database, async ({ tx }) => {
      await lockProject(tx, projectId);
      return stopPendingSends(tx, projectId);
    });
    await runPurge(ctx, projectId, RESET_STEPS, deleted).catch((err: unknown) => {
      if (!(err instanceof PurgeStopped)) throw err;
      throw conflict(`The reset stopped: ${err.message}; ask again to finish`, { deleted: onlyResetTables(err.deleted, present) });
    });
    return { success: true as const, deleted: onlyResetTables(deleted, present) };
  } finally {
    release();
  }
}

/** The answer's counts: one per reset table (the rollups and members removed with them are not counted). */
function onlyResetTables(deleted: Record<string, number>, present: Set<string>): Record<string, number> {
  return Object.fromEntries(RESET_TABLES.filter((t) => present.has(t)).map((t) => [t, deleted[t] ?? 0]));
}

export type SetupState = {
  hasVerifiedDomain: boolean;
  contactCount: number;
  hasTemplate: boolean;
  lastCampaignSentAt: string | null;
  hasEnabledWorkflow: boolean;
  hasSentEmail: boolean;
  hasSubscription: boolean;
};

/**
 * GET /projects/:id/setup-state: one round trip of EXISTS and indexed lookups; the contacts from
 * their counters (contact_counts, as GET /contacts's `total`: counting them took 87 ms a million).
 */
export async function setupState(ctx: AppContext, projectId: string): Promise<SetupState> {
  const workflows = (await existingTables(ctx.database.db, ['workflows'])).has('workflows');
  const { rows } = await ctx.database.db.execute<{
    has_verified_domain: boolean;
    contact_count: number;
    has_template: boolean;
    last_campaign_sent_at: string | null;
    has_enabled_workflow: boolean;
    has_sent_email: boolean;
    has_subscription: boolean;
  }>(sql`
    SELECT
      EXISTS (SELECT 1 FROM domains WHERE project_id = ${projectId} AND status = 'verified') AS has_verified_domain,
      (SELECT coalesce(sum(count), 0)::int FROM contact_counts WHERE project_id = ${projectId}) AS contact_count,
      EXISTS (SELECT 1 FROM templates WHERE project_id = ${projectId}) AS has_template,
      (SELECT to_char(max(sent_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM campaigns WHERE project_id = ${projectId} AND sent_at IS NOT NULL) AS last_campaign_sent_at,
      ${workflows ? sql`EXISTS (SELECT 1 FROM workflows WHERE project_id = ${projectId} AND enabled)` : sql`false`} AS has_enabled_workflow,
      EXISTS (SELECT 1 FROM emails WHERE project_id = ${projectId} AND sent_at IS NOT NULL) AS has_sent_email,
      EXISTS (SELECT 1 FROM project_billing WHERE project_id = ${projectId} AND subscription_status IN ('active', 'trialing', 'past_due')) AS has_subscription`);
  const r = rows[0];
  return {
    hasVerifiedDomain: r.has_verified_domain,
    contactCount: r.contact_count,
    hasTemplate: r.has_template,
    lastCampaignSentAt: r.last_campaign_sent_at,
    hasEnabledWorkflow: r.has_enabled_workflow,
    hasSentEmail: r.has_sent_email,
    hasSubscription: r.has_subscription,
  };
}
