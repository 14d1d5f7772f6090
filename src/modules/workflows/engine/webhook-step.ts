import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { withTransaction } from '../../../db/client.ts';
import { projects } from '../../../db/schema/users.ts';
import { workflowExecutions, workflowStepExecutions } from '../../../db/schema/workflows.ts';
import type { WebhookConfig } from '../step-config.ts';
import type { ClaimedExecution, ContactRow } from './advance.ts';
import { type BatchState, readOnce } from './batch.ts';
import type { RunStep } from './graph.ts';
import { RenderLimitError, Renderer } from './variables.ts';
import { type WebhookAttempt, type WebhookRequest, callWebhook } from './webhook.ts';

/**
 * A WEBHOOK step's attempts. The advance transaction renders the request and leases the execution;
 * `attemptWebhook` calls it outside any transaction and records the outcome: success → the next
 * step; a network error, 429 or 5xx → another attempt after a durable backoff (the execution waits
 * on its `due_at` like a DELAY, holding no worker); a final failure → the execution ends FAILED.
 * The step row id is the Idempotency-Key, the same for every attempt.
 */

/** The rendered body's limit in UTF-8 bytes: past it the step fails without a call. */
export const MAX_RENDERED_BODY_BYTES = 1024 * 1024;
/** The rendered header values' limit, all together, in characters: past it the step fails without a call. */
export const MAX_RENDERED_HEADERS_CHARS = 64 * 1024;

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
  /** The rendered request, or why it was not rendered (the attempt then fails without a call). */
  request: WebhookRequest | { refused: string };
  secret: string;
};

/** Characters a prepared job holds until its call is made: its url, header values and body. */
export function webhookJobSize(job: WebhookJob): number {
  if ('refused' in job.request) return 0;
  const { url, headers, body } = job.request;
  return url.length + (body?.length ?? 0) + Object.values(headers).reduce((n, v) => n + v.length, 0);
}

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
  return {
    executionId: e.id,
    stepId: step.id,
    stepRowId: waiting.id,
    attempt: waiting.attempt,
    lease,
    projectId: e.project_id,
    request: renderRequest(c, new Renderer(variablesOf(e, contact)), () => defaultBody(e, step, contact)),
    secret: await secretFor(b, e.project_id),
  };
}

const HEADERS_TOO_LARGE = `request too large: the rendered header values are over ${MAX_RENDERED_HEADERS_CHARS / 1024} KB`;
const BODY_TOO_LARGE = `request too large: the rendered body is over ${MAX_RENDERED_BODY_BYTES / (1024 * 1024)} MB`;

class HeadersTooLargeError extends Error {}

/** Renders url, headers and body within their limits; a request over a limit is refused, not cut. */
function renderRequest(c: WebhookConfig, render: Renderer, defaultBodyText: () => string): WebhookRequest | { refused: string } {
  const method = c.method ?? 'POST';
  try {
    const headers = renderHeaders(c.headers ?? {}, render);
    // A character is at least one UTF-8 byte, so the character limit stops rendering early.
    const text = method === 'GET' ? null : c.body !== undefined ? render.jsonBody(c.body, MAX_RENDERED_BODY_BYTES) : defaultBodyText();
    if (text !== null && (text.length > MAX_RENDERED_BODY_BYTES || Buffer.byteLength(text) > MAX_RENDERED_BODY_BYTES)) return { refused: BODY_TOO_LARGE };
    return { url: render.string(c.url, encodeURIComponent), method, headers, body: text };
  } catch (err) {
    if (err instanceof RenderLimitError) return { refused: BODY_TOO_LARGE };
    if (err instanceof HeadersTooLargeError) return { refused: HEADERS_TOO_LARGE };
    throw err;
  }
}

/** Header values, rendered while their total stays within MAX_RENDERED_HEADERS_CHARS. */
function renderHeaders(source: Record<string, string>, render: Renderer): Record<string, string> {
  const headers: Record<string, string> = {};
  let room = MAX_RENDERED_HEADERS_CHARS;
  for (const [name, template] of Object.entries(source)) {
    // One character more than the room shows the value does not fit, without rendering the rest.
    const value = render.string(template, undefined, room + 1);
    if (value.length > room) throw new HeadersTooLargeError();
    room -= value.length;
    headers[name] = value.replace(/[\r\n]+/g, ' ');
  }
  return headers;
}

/** Without a configured body: who, where, and the execution context. */
function defaultBody(e: ClaimedExecution, step: RunStep, contact: ContactRow): string {
  return JSON.stringify({
    workflowId: e.workflow_id,
    executionId: e.id,
    stepId: step.id,
    contact: { id: contact.id, email: contact.email },
    event: e.context ?? {},
  });
}

/** The outcome of an attempt whose request was refused before any call. */
const refusedAttempt = (error: string): WebhookAttempt => ({
  ok: false,
  retryable: false,
  status: null,
  body: '',
  error,
  retryAfterSeconds: null,
  durationMs: 0,
});

/** Makes the attempt and records it (only while the lease is still this attempt's). */
export async function attemptWebhook(ctx: AppContext, job: WebhookJob): Promise<void> {
  const res =
    'refused' in job.request
      ? refusedAttempt(job.request.refused)
      : await callWebhook(job.request, {
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
