import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { uuidv7 } from '../../db/ids.ts';
import { projectSuspensions } from '../../db/schema/reputation.ts';
import { projects } from '../../db/schema/users.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { failQueuedOfProject } from '../emails/lifecycle.ts';
import { type Assessment, assess, countsFor, windowStart } from './rates.ts';

export const REPUTATION_REASON = 'EMAIL_REPUTATION';
export const STOPPED_ERROR = 'Not sent: the project was disabled because its bounce or complaint rate is too high (EMAIL_REPUTATION)';

/**
 * The reputation guard (decisions.md § 10): a critical bounce or complaint rate disables the
 * project at once (API keys see it through the key cache notification) and fails its QUEUED
 * emails. Runs after hard bounces and complaints (at most once a second per project and process:
 * reputationEventRecorded), and hourly for recently active projects (a rate can cross a threshold
 * without a new bounce once the volume reaches the minimum).
 */
export async function evaluateReputation(ctx: AppContext, projectId: string): Promise<Assessment> {
  const assessment = assess(await countsFor(ctx.database.db, projectId, ctx.clock.now()));
  if (assessment.status === 'critical') await suspendForReputation(ctx, projectId, assessment);
  return assessment;
}

/** Disables the project (once) and stops its queued sends. True when this call disabled it. */
export async function suspendForReputation(ctx: AppContext, projectId: string, a: Assessment): Promise<boolean> {
  const now = ctx.clock.now();
  const stopped = await withTransaction(ctx.database, async ({ tx, client }) => {
    const changed = await tx
      .update(projects)
      .set({ disabled: true, disabledReason: REPUTATION_REASON, updatedAt: now })
      .where(and(eq(projects.id, projectId), eq(projects.disabled, false)))
      .returning({ id: projects.id });
    if (changed.length === 0) return null;
    await tx.insert(projectSuspensions).values({
      id: uuidv7(now.getTime()),
      projectId,
      reason: REPUTATION_REASON,
      bounceRate7d: a.bounceRate.last7Days,
      bounceRateAll: a.bounceRate.allTime,
      complaintRate7d: a.complaintRate.last7Days,
      complaintRateAll: a.complaintRate.allTime,
      sentLast7Days: a.sentLast7Days,
      sentAllTime: a.sentAllTime,
      createdAt: now,
    });
    const failed = await failQueuedOfProject(tx, projectId, STOPPED_ERROR, now);
    await ctx.keys.notifyChanged(projectId, client);
    return failed;
  });
  if (stopped === null) return false;
  ctx.log.warn({ projectId, bounceRate: a.bounceRate, complaintRate: a.complaintRate, stoppedEmails: stopped }, 'project disabled: email reputation');
  return true;
}

/** Why the delivery worker must not send for this project now (it is disabled), or null. */
export async function sendingBlocked(ctx: AppContext, projectId: string): Promise<string | null> {
  const [row] = await ctx.database.db.select({ disabled: projects.disabled, reason: projects.disabledReason }).from(projects).where(eq(projects.id, projectId));
  if (!row) return 'The project no longer exists';
  if (!row.disabled) return null;
  return row.reason === REPUTATION_REASON ? STOPPED_ERROR : `Not sent: the project is disabled (${row.reason ?? 'disabled'})`;
}

/** The periodic pass: every enabled project with an email outcome (sent, bounced, …) in the window. */
export async function evaluateActiveProjects(ctx: AppContext): Promise<void> {
  const since = windowStart(ctx.clock.now()).toISOString();
  const rows = await ctx.database.db
    .select({ id: projects.id })
    .from(projects)
    .where(
      and(
        eq(projects.disabled, false),
        sql`EXISTS (SELECT 1 FROM email_outcome_slots s WHERE s.project_id = ${projects.id} AND s.slot >= ${since}::timestamptz)`,
      ),
    );
  for (const { id } of rows) {
    await evaluateReputation(ctx, id).catch((err) => ctx.log.error({ err, projectId: id }, 'reputation check failed'));
  }
}

// ── Checks after bounces and complaints, coalesced per project ──

/** The shortest time between two checks of one project's rates after bounces or complaints (per process). */
export const CHECK_INTERVAL_MS = 1000;

export type ProjectChecks = {
  /** No check may start before this (Date.now() time). */
  nextStartAt: number;
  /** The check running now. */
  running: Promise<unknown> | null;
  /** A check is due at nextStartAt: it will count whatever was recorded before it starts. */
  scheduled: boolean;
};

/** The projects with a check running or due in this process (ctx.reputationChecks). */
export type ReputationChecks = Map<string, ProjectChecks>;

/**
 * A hard bounce or complaint of the project has just committed: check its reputation. The first
 * in a quiet second is checked at once and awaited (the caller answers after a critical rate has
 * disabled the project). One that comes while a check runs or within CHECK_INTERVAL_MS of the
 * last one is left to a single check scheduled for the end of that interval, which counts every
 * bounce recorded before it starts; the caller does not wait for it. A bounce storm of thousands
 * in one project costs one check a second in each process that receives them (the hourly pass
 * covers a scheduled check lost with its process).
 */
export async function reputationEventRecorded(ctx: AppContext, projectId: string): Promise<void> {
  const checks = ctx.reputationChecks;
  let project = checks.get(projectId);
  if (!project) checks.set(projectId, (project = { nextStartAt: 0, running: null, scheduled: false }));
  if (project.scheduled) return;
  const now = Date.now();
  if (!project.running && now >= project.nextStartAt) {
    await startCheck(ctx, checks, projectId, project);
    return;
  }
  project.scheduled = true;
  const state = project;
  setTimeout(() => void runScheduledCheck(ctx, checks, projectId, state), Math.max(0, project.nextStartAt - now)).unref();
}

async function runScheduledCheck(ctx: AppContext, checks: ReputationChecks, projectId: string, project: ProjectChecks): Promise<void> {
  try {
    await project.running?.catch(() => undefined);
    project.scheduled = false;
    await startCheck(ctx, checks, projectId, project);
  } catch (err) {
    ctx.log.error({ err, projectId }, 'reputation check failed');
  }
}

function startCheck(ctx: AppContext, checks: ReputationChecks, projectId: string, project: ProjectChecks): Promise<unknown> {
  project.nextStartAt = Date.now() + CHECK_INTERVAL_MS;
  const running = evaluateReputation(ctx, projectId).finally(() => {
    project.running = null;
    forgetWhenIdle(checks, projectId, project);
  });
  project.running = running;
  return running;
}

/** Drops the project's entry once its interval is over with nothing running or due (the map holds only busy projects). */
function forgetWhenIdle(checks: ReputationChecks, projectId: string, project: ProjectChecks): void {
  setTimeout(
    () => {
      const idle = !project.running && !project.scheduled && Date.now() >= project.nextStartAt;
      if (idle && checks.get(projectId) === project) checks.delete(projectId);
    },
    Math.max(0, project.nextStartAt - Date.now()),
  ).unref();
}

const empty = z.object({}).passthrough();

export const reputationQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'reputation-check',
  schema: empty,
  cron: '23 * * * *',
  retryLimit: 1,
  expireInSeconds: 30 * 60,
  handler: (ctx) => evaluateActiveProjects(ctx),
};
