import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { carryMonthUsage } from '../billing/usage.ts';

/**
 * Reset and delete of a project, and what an onboarding checklist needs. Both start by stopping
 * what is pending: campaigns in flight or scheduled and emails not yet handed to a worker are
 * removed first, under the project row lock, so no worker claims them while the rest goes.
 */

/** Tables of project data that a reset empties, in an order that respects their references. */
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

/** Tables that may not exist yet (the workflows engine ships them in its own migration). */
async function existingTables(db: Db, names: readonly string[]): Promise<Set<string>> {
  const { rows } = await db.execute<{ name: string }>(sql`
    SELECT n AS name FROM unnest(${sql.param(names)}::text[]) AS n WHERE to_regclass('public.' || quote_ident(n)) IS NOT NULL`);
  return new Set(rows.map((r) => r.name));
}

/** Stops pending and scheduled sends of the project (call inside the transaction that holds the project row lock). */
export async function stopPendingSends(db: Db, projectId: string): Promise<void> {
  await db.execute(sql`DELETE FROM campaigns WHERE project_id = ${projectId} AND status IN ('SCHEDULED', 'SENDING')`);
  await db.execute(sql`DELETE FROM emails WHERE project_id = ${projectId} AND status = 'QUEUED'`);
}

export async function lockProject(db: Db, projectId: string): Promise<void> {
  await db.execute(sql`SELECT 1 FROM projects WHERE id = ${projectId} FOR UPDATE`);
}

/**
 * POST /users/@me/projects/:id/reset: deletes contacts, events, emails, campaigns, segments,
 * workflows, templates (with imports, bulk jobs, idempotency records and field definitions); keeps
 * domains, members, keys, settings, suppressions and billing (this month's usage is carried over).
 */
export async function resetProject(ctx: AppContext, projectId: string): Promise<{ success: true; deleted: Record<string, number> }> {
  return withTransaction(ctx.database, async ({ tx }) => {
    await lockProject(tx, projectId);
    await stopPendingSends(tx, projectId);
    await carryMonthUsage(tx, projectId, ctx.clock.now());
    const present = await existingTables(tx, RESET_TABLES);
    const deleted: Record<string, number> = {};
    for (const table of RESET_TABLES) {
      if (!present.has(table)) continue;
      const res = await tx.execute(sql`DELETE FROM ${sql.identifier(table)} WHERE project_id = ${projectId}`);
      deleted[table] = res.rowCount ?? 0;
    }
    // The emails' shared contents go with them (counted as part of the emails).
    await tx.execute(sql`DELETE FROM email_contents WHERE project_id = ${projectId}`);
    // The analytics rollups of the events (analytics/rollups.ts) go with them; the event counters
    // (events/counts.ts) followed the events' delete by trigger.
    await tx.execute(sql`DELETE FROM event_name_days WHERE project_id = ${projectId}`);
    await tx.execute(sql`DELETE FROM event_name_contacts WHERE project_id = ${projectId}`);
    // And those of the emails (analytics/outcome-rollups.ts).
    await tx.execute(sql`DELETE FROM email_outcome_slots WHERE project_id = ${projectId}`);
    await tx.execute(sql`DELETE FROM campaign_outcomes WHERE project_id = ${projectId}`);
    return { success: true as const, deleted };
  });
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

/** GET /projects/:id/setup-state: one round trip of EXISTS and indexed lookups. */
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
      (SELECT count(*)::int FROM contacts WHERE project_id = ${projectId}) AS contact_count,
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
