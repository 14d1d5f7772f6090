import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { projects } from '../../../db/schema/users.ts';
import { workflowExecutions, workflowStepExecutions } from '../../../db/schema/workflows.ts';
import type { WebhookConfig } from '../step-config.ts';
import type { ClaimedExecution, ContactRow } from './advance.ts';
import { type BatchState, readOnce } from './batch.ts';
import type { RunStep } from './graph.ts';
import { renderJson, renderString } from './variables.ts';
import { type WebhookRequest, callWebhook } from './webhook.ts';

/**
 * A WEBHOOK step's attempts. The advance transaction renders the request and leases the execution;
 * `attemptWebhook` calls it outside any transaction and records the outcome: success → the next
 * step; a network error, 429 or 5xx → another attempt after a durable backoff (the execution waits
 * on its `due_at` like a DELAY, holding no worker); a final failure → the execution ends FAILED.
 * The step row id is the Idempotency-Key, the same for every attempt.
 */

export const MAX_WEBHOOK_ATTEMPTS = 3;
/** Backoff before attempt n+1: 10 s, then 30 s (or a longer Retry-After, up to an hour). */
export const webhookBackoffMs = (attempt: number, retryAfterSeconds: number | null): number =>
  Math.max(10_000 * 3 ** (attempt - 1), Math.min(retryAfterSeconds ?? 0, 3600) * 1000);

export type WebhookJob = {
  executionId: string;
  stepId: string;
  stepRowId: string;
  attempt: number;
  lease: Date;
  projectId: string;
  request: WebhookRequest;
  secret: string;
};

const secretFor = (b: BatchState, projectId: string): Promise<string> =>
  readOnce(b.webhookSecrets, projectId, async () => {
    const [project] = await b.tx.select({ webhookSecret: projects.webhookSecret }).from(projects).where(eq(projects.id, projectId));
    return project?.webhookSecret ?? '';
  });

/** The variables of url, header values and body strings: the contact's fields and data, and `event.*` (the context). */
function variablesOf(e: ClaimedExecution, contact: ContactRow): Record<string, unknown> {
  return Object.fromEntries([
    ...Object.entries(contact.data),
    ['id', contact.id],
    ['email', contact.email],
    ['subscribed', contact.subscribed],
    ['data', contact.data],
    ['event', e.context ?? {}],
    ['workflowId', e.workflow_id],
    ['executionId', e.id],
  ]);
}

export async function prepareWebhook(
  b: BatchState,
  e: ClaimedExecution,
  step: RunStep,
  contact: ContactRow,
  waiting: { id: string; attempt: number },
  lease: Date,
): Promise<WebhookJob> {
  const c = step.config as WebhookConfig;
  const vars = variablesOf(e, contact);
  const method = c.method ?? 'POST';
  const body =
    method === 'GET'
      ? null
      : JSON.stringify(
          c.body !== undefined
            ? renderJson(c.body, vars)
            : { workflowId: e.workflow_id, executionId: e.id, stepId: step.id, contact: { id: contact.id, email: contact.email }, event: e.context ?? {} },
        );
  const headers = Object.fromEntries(Object.entries(c.headers ?? {}).map(([k, v]) => [k, renderString(v, vars).replace(/[\r\n]+/g, ' ')]));
  return {
    executionId: e.id,
    stepId: step.id,
    stepRowId: waiting.id,
    attempt: waiting.attempt,
    lease,
    projectId: e.project_id,
    request: { url: renderString(c.url, vars, encodeURIComponent), method, headers, body },
    secret: await secretFor(b, e.project_id),
  };
}

/** Makes the attempt and records it (only while the lease is still this attempt's). */
export async function attemptWebhook(ctx: AppContext, job: WebhookJob): Promise<void> {
  const res = await callWebhook(job.request, {
    secret: job.secret,
    idempotencyKey: job.stepRowId,
    allowPrivate: ctx.config.webhookAllowPrivateNetworks,
    resolver: ctx.dns,
  });
  const now = ctx.clock.now();
  const output = { status: res.status, body: res.body, attempts: job.attempt, durationMs: res.durationMs, ...(res.error ? { error: res.error } : {}) };
  await withTransaction(ctx.database, async ({ tx }) => {
    const held = await tx
      .select({ id: workflowExecutions.id })
      .from(workflowExecutions)
      .where(
        and(
          eq(workflowExecutions.id, job.executionId),
          eq(workflowExecutions.status, 'WAITING'),
          eq(workflowExecutions.currentStepId, job.stepId),
          eq(workflowExecutions.leaseUntil, job.lease),
        ),
      )
      .for('update');
    if (held.length === 0) return; // cancelled meanwhile, or the lease ran out and another worker took over
    const stepRow = eq(workflowStepExecutions.id, job.stepRowId);
    const executionRow = eq(workflowExecutions.id, job.executionId);
    if (res.ok) {
      await tx.update(workflowStepExecutions).set({ status: 'COMPLETED', output, error: null, completedAt: now }).where(stepRow);
      const nowIso = now.toISOString();
      await tx.execute(sql`
        UPDATE workflow_executions x
           SET status = CASE WHEN n.next IS NULL THEN 'COMPLETED' ELSE 'RUNNING' END,
               current_step_id = COALESCE(n.next, x.current_step_id),
               due_at = CASE WHEN n.next IS NULL THEN NULL ELSE ${nowIso}::timestamptz END,
               completed_at = CASE WHEN n.next IS NULL THEN ${nowIso}::timestamptz ELSE NULL END,
               lease_until = NULL, updated_at = ${nowIso}::timestamptz
          FROM (SELECT (SELECT to_step_id FROM workflow_transitions WHERE from_step_id = ${job.stepId} AND branch IS NULL) AS next) n
         WHERE x.id = ${job.executionId}`);
    } else if (res.retryable && job.attempt < MAX_WEBHOOK_ATTEMPTS) {
      const dueAt = new Date(now.getTime() + webhookBackoffMs(job.attempt, res.retryAfterSeconds));
      await tx
        .update(workflowStepExecutions)
        .set({ attempt: sql`${workflowStepExecutions.attempt} + 1`, output: { ...output, nextAttemptAt: dueAt.toISOString() }, error: res.error })
        .where(stepRow);
      await tx.update(workflowExecutions).set({ dueAt, leaseUntil: null, updatedAt: now }).where(executionRow);
    } else {
      const reason = `webhook failed after ${job.attempt} attempt${job.attempt === 1 ? '' : 's'}: ${res.error ?? 'unknown error'}`;
      await tx.update(workflowStepExecutions).set({ status: 'FAILED', output, error: reason, completedAt: now }).where(stepRow);
      await tx
        .update(workflowExecutions)
        .set({ status: 'FAILED', error: reason, dueAt: null, completedAt: now, leaseUntil: null, updatedAt: now })
        .where(executionRow);
    }
  });
}
