import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';
import { type Db, type Tx, withTransaction } from '../../../db/client.ts';
import { uuidv7 } from '../../../db/ids.ts';
import type { WorkflowExecutionStatus, WorkflowStepExecutionStatus } from '../../../db/schema/workflows.ts';
import { isoMs } from '../../contacts/sql.ts';
import { DELIVERY_QUEUE } from '../../emails/delivery/queue-name.ts';
import { queueEmailsWithStatus } from '../../emails/queue.ts';
import type { BatchState } from './batch.ts';
import { type ProjectFilter, claimDue, nextDue } from './claim.ts';
import { type RunGraph, type RunStep, loadGraphs } from './graph.ts';
import { type PausedWalk, type StepEffects, projectsPastConditionBudget, runStep, updateContactsTogether, updatesTogether } from './steps.ts';
import { type WebhookJob, prepareWebhook, webhookJobSize } from './webhook-step.ts';
import type { WaitingWebhook, WebhookSlots } from './webhook-slots.ts';

/**
 * The advance part of the engine: one transaction claims up to `batchSize` due executions
 * (claim.ts: each project gets its share of a batch; `FOR UPDATE SKIP LOCKED`: a crashed worker's
 * locks die with its connection, so another worker takes the rows over at once), walks each to its
 * next wait point, and writes every step row, email and execution change of the batch before it
 * commits. Nothing of a batch is visible until then, so a worker killed mid-batch leaves no step
 * run and no email queued twice: its successor claims the same executions and runs the same steps
 * once.
 *
 * WEBHOOK attempts are the exception (an HTTP call must not hold a transaction): the claim leases
 * such an execution (`lease_until`), and webhook-step.ts makes the call and records it afterwards.
 */

export const WEBHOOK_LEASE_MS = 60_000;
const MAX_STEPS_PER_RUN = 250;

export type ClaimedExecution = {
  id: string;
  project_id: string;
  workflow_id: string;
  contact_id: string;
  status: 'RUNNING' | 'WAITING';
  current_step_id: string | null;
  context: Record<string, unknown>;
  depth: number;
  waiting_event: string | null;
};

export type ContactRow = { id: string; email: string; subscribed: boolean; data: Record<string, unknown>; createdAt: string; updatedAt: string };

export type NewStepRow = {
  id: string;
  execution_id: string;
  workflow_id: string;
  step_id: string;
  project_id: string;
  status: WorkflowStepExecutionStatus;
  attempt: number;
  output: Record<string, unknown> | null;
  error: string | null;
  started_at: string;
  completed_at: string | null;
};

export type StepRowUpdate = {
  id: string;
  status: WorkflowStepExecutionStatus;
  output: Record<string, unknown> | null;
  error: string | null;
  completed_at: string | null;
};

export type ExecUpdate = {
  id: string;
  status: WorkflowExecutionStatus;
  current_step_id: string | null;
  context: Record<string, unknown>;
  due_at: string | null;
  waiting_event: string | null;
  exit_reason: string | null;
  error: string | null;
  completed_at: string | null;
};

/** `emailsQueued`: emails its SEND_EMAIL steps queued for delivery (QUEUED, not skipped). */
/** `webhooksWaiting`: WEBHOOK steps left for a later batch because their project had no free slot. */
/** `slowConditions`: projects whose CONDITION reads spent their budget in this batch (steps.ts). */
export type AdvanceResult = {
  claimed: number;
  webhooks: WebhookJob[];
  emailsQueued: number;
  webhooksWaiting: WaitingWebhook[];
  slowConditions: string[];
  /** After a probe (`probeFirst`) found nothing due yet: in how many ms the soonest execution within its window falls due (null: none). */
  dueInMs?: number | null;
};

const NOTHING_CLAIMED: AdvanceResult = { claimed: 0, webhooks: [], emailsQueued: 0, webhooksWaiting: [], slowConditions: [] };

type AdvanceOptions = {
  batchSize: number;
  /** Restricts the claim (the one-by-one retry of a failed batch). */
  ids?: string[];
  /** Restricts the claim to some projects, or leaves some out (the runner's slow lane and its other loops). */
  projects?: ProjectFilter;
  /** Each project with due executions gets its share of the batch (claim.ts): while a backlog lasts. */
  fair?: boolean;
  /** Called as soon as the claim took a full batch (more is probably due): the runner starts its other loops. */
  onFullClaim?: () => void;
  /**
   * Characters of webhook requests this batch may prepare (webhookJobSize); the webhook steps past
   * it stay due, for a later batch. At least one is prepared.
   */
  webhookRoom?: number;
  /**
   * The runner's webhook calls under way, counted per project and in all: a webhook step is
   * prepared only if a slot is free (`take`), and the runner gives the slot back when the call ends.
   * Without slots (the one-by-one retry), every due webhook step is prepared.
   */
  webhookSlots?: WebhookSlots;
  /**
   * Asks first whether anything is due (one statement) and opens no transaction when nothing is:
   * the idle runner's poll. It also tells when the soonest execution due within `withinMs` is.
   */
  probeFirst?: { withinMs: number };
};

/** A webhook step with no slot or room now waits this long before a batch looks at it again. */
export const WEBHOOK_SLOT_WAIT_MS = 1_000;

/** Claims and advances one batch. */
export async function advanceBatch(ctx: AppContext, opts: AdvanceOptions): Promise<AdvanceResult> {
  if (opts.probeFirst) {
    const now = ctx.clock.now();
    const horizon = new Date(now.getTime() + opts.probeFirst.withinMs);
    const due = await nextDue(ctx.database.pool, { horizon, realNow: new Date(), projects: opts.projects });
    if (due === null || due > now) return { ...NOTHING_CLAIMED, dueInMs: due && due.getTime() - now.getTime() };
  }
  // The slots a batch took are the runner's once it commits (each job gives its own back); a failed batch gives them back.
  const taken: string[] = [];
  const slots = opts.webhookSlots;
  const tracked = slots && {
    take: (projectId: string, executionId: string) => {
      if (!slots.take(projectId, executionId)) return false;
      taken.push(projectId);
      return true;
    },
    give: slots.give,
  };
  let result: AdvanceResult;
  try {
    result = await withTransaction(ctx.database, (t) => advanceIn(ctx, t, { ...opts, webhookSlots: tracked }));
  } catch (err) {
    for (const projectId of taken) slots!.give(projectId);
    throw err;
  }
  if (result.emailsQueued > 0) ctx.jobs.wake(DELIVERY_QUEUE);
  return result;
}

async function advanceIn(ctx: AppContext, { tx, client }: Tx, opts: AdvanceOptions): Promise<AdvanceResult> {
  const now = ctx.clock.now();
  const realNow = Date.now();
  const claimed = await claimDue(tx, { now, realNow: new Date(realNow), batchSize: opts.batchSize, fair: opts.fair, ids: opts.ids, projects: opts.projects });
  if (claimed.length === 0) return NOTHING_CLAIMED;
  if (claimed.length >= opts.batchSize) opts.onFullClaim?.();

  // One connection runs one statement at a time: these are sequential.
  const graphs = await loadGraphs(tx, [...new Set(claimed.map((e) => e.workflow_id))]);
  const contacts = await loadContacts(tx, [...new Set(claimed.map((e) => e.contact_id))]);
  const waitingRows = await loadWaitingRows(
    tx,
    claimed.filter((e) => e.status === 'WAITING').map((e) => e.id),
  );

  const batch: BatchState = {
    ctx,
    tx,
    client,
    now,
    types: new Map(),
    templates: new Map(),
    emails: [],
    billing: new Map(),
    sharedContacts: new Set(),
    webhookSecrets: new Map(),
    conditionMs: new Map(),
  };
  const inserts: NewStepRow[] = [];
  const updates: StepRowUpdate[] = [];
  const execs: ExecUpdate[] = [];
  const webhooks: WebhookJob[] = [];
  let webhookRoom = opts.webhookRoom ?? Number.POSITIVE_INFINITY;
  const webhooksLater: WaitingWebhook[] = [];
  const webhooksWaiting: WaitingWebhook[] = [];
  const lease = new Date(realNow + WEBHOOK_LEASE_MS + Math.floor(Math.random() * 1000));

  // A contact with one execution in the batch has its UPDATE_CONTACT data changes made together:
  // its walk pauses there, the paused walks' changes are written per step in one statement, then
  // they go on. (A contact with several executions here is updated in its walks, in order.)
  const seen = new Set<string>();
  for (const e of claimed) (seen.has(e.contact_id) ? batch.sharedContacts : seen).add(e.contact_id);
  let paused: PausedWalk[] = [];
  const settle = (r: ExecUpdate | PausedWalk) => {
    if ('pausedAt' in r) paused.push(r);
    else execs.push(r);
  };
  for (const e of claimed) {
    const graph = graphs.get(e.workflow_id)!;
    const step = e.current_step_id ? graph.steps.get(e.current_step_id) : undefined;
    const waiting = waitingRows.get(e.id);
    if (e.status === 'WAITING' && step?.type === 'WEBHOOK' && waiting) {
      // Not leased, and due a second later: a later batch prepares it. One that waits for a slot
      // (not for room) is told to the runner, which makes it due again once a slot is free.
      if (webhookRoom <= 0) {
        webhooksLater.push({ executionId: e.id, projectId: e.project_id, stepId: step.id });
        continue;
      }
      if (opts.webhookSlots && !opts.webhookSlots.take(e.project_id, e.id)) {
        const w = { executionId: e.id, projectId: e.project_id, stepId: step.id };
        webhooksLater.push(w);
        webhooksWaiting.push(w);
        continue;
      }
      const job = await prepareWebhook(batch, e, step, contacts.get(e.contact_id)!, waiting, lease);
      webhookRoom -= webhookJobSize(job);
      webhooks.push(job);
      continue;
    }
    settle(await walk(batch, e, graph, contacts, waiting, inserts, updates));
  }
  while (paused.length > 0) {
    const round = paused;
    paused = [];
    await updateContactsTogether(batch, round, contacts);
    for (const p of round) settle(await walk(batch, p.execution, graphs.get(p.execution.workflow_id)!, contacts, undefined, inserts, updates, p));
  }

  let emailsQueued = 0;
  if (batch.emails.length > 0) {
    const queued = await queueEmailsWithStatus(
      ctx,
      { tx, client },
      batch.emails.map((q) => q.email),
    );
    batch.emails.forEach(({ row }, i) => {
      const q = queued[i];
      row.output = { ...row.output, emailId: q.id, emailStatus: q.status };
      if (q.status === 'QUEUED') emailsQueued++;
      else {
        row.status = 'SKIPPED';
        row.output.reason = q.status === 'SUPPRESSED' ? 'suppressed' : (row.output.reason ?? 'not sent');
      }
    });
  }

  if (webhooks.length > 0) {
    await tx.execute(sql`
      UPDATE workflow_executions SET lease_until = ${lease.toISOString()}::timestamptz
       WHERE id = ANY(${sql.param(webhooks.map((w) => w.executionId))}::uuid[])`);
  }
  if (webhooksLater.length > 0) {
    // Not due again at once: claimed every batch, they would fill the batches while they wait for room.
    await tx.execute(sql`
      UPDATE workflow_executions SET due_at = ${new Date(now.getTime() + WEBHOOK_SLOT_WAIT_MS).toISOString()}::timestamptz
       WHERE id = ANY(${sql.param(webhooksLater.map((w) => w.executionId))}::uuid[])`);
  }
  await writeResults(tx, now, inserts, updates, execs);
  return { claimed: claimed.length, webhooks, emailsQueued, webhooksWaiting, slowConditions: projectsPastConditionBudget(batch) };
}

/** Runs one execution from its current step to its next wait point (or its end). */
async function walk(
  batch: BatchState,
  e: ClaimedExecution,
  graph: RunGraph,
  contacts: Map<string, ContactRow>,
  waiting: { id: string; step_id: string } | undefined,
  inserts: NewStepRow[],
  updates: StepRowUpdate[],
  /** Going on after a paused UPDATE_CONTACT step whose change is written. */
  from?: PausedWalk,
): Promise<ExecUpdate | PausedWalk> {
  const nowIso = batch.now.toISOString();
  const state: ExecUpdate = from?.state ?? {
    id: e.id,
    status: 'RUNNING',
    current_step_id: e.current_step_id,
    context: e.context ?? {},
    due_at: null,
    waiting_event: null,
    exit_reason: null,
    error: null,
    completed_at: null,
  };
  const end = (status: WorkflowExecutionStatus, extra: Partial<ExecUpdate> = {}): ExecUpdate =>
    Object.assign(state, { status, due_at: null, waiting_event: null, completed_at: nowIso }, extra);

  let stepId = e.current_step_id;
  let resuming = e.status === 'WAITING';
  let n = 0;
  if (from) {
    const next = graph.next(from.pausedAt.id, null);
    if (!next) return end('COMPLETED');
    [stepId, resuming, n] = [next, false, from.steps + 1];
  }
  for (; n < MAX_STEPS_PER_RUN; n++) {
    const step: RunStep | undefined = stepId ? graph.steps.get(stepId) : undefined;
    if (!step) {
      if (waiting) updates.push({ id: waiting.id, status: 'FAILED', output: null, error: 'step no longer exists', completed_at: nowIso });
      return end('FAILED', { error: `step ${stepId ?? '(none)'} no longer exists in the workflow` });
    }
    state.current_step_id = step.id;
    let branch: StepEffects['branch'];
    if (resuming) {
      resuming = false;
      // A DELAY that is over, or a WAIT_FOR_EVENT whose timeout passed.
      const timedOut = step.type === 'WAIT_FOR_EVENT';
      if (waiting) {
        updates.push({
          id: waiting.id,
          status: 'COMPLETED',
          output: timedOut ? { branch: 'timeout' } : { waitedUntil: nowIso },
          error: null,
          completed_at: nowIso,
        });
        waiting = undefined;
      }
      branch = timedOut ? 'timeout' : null;
    } else {
      const row: NewStepRow = {
        id: uuidv7(),
        execution_id: e.id,
        workflow_id: e.workflow_id,
        step_id: step.id,
        project_id: e.project_id,
        status: 'COMPLETED',
        attempt: 1,
        output: null,
        error: null,
        started_at: nowIso,
        completed_at: nowIso,
      };
      inserts.push(row);
      if (updatesTogether(batch, e, step)) return { execution: e, state, pausedAt: step, row, steps: n };
      const fx = await runStep(batch, { execution: e, step, row, contacts, context: state.context });
      if (fx.later) {
        // This step is run again, from its start, by a later batch.
        inserts.splice(inserts.indexOf(row), 1);
        return Object.assign(state, { status: 'RUNNING', due_at: nowIso });
      }
      if (fx.context) state.context = fx.context;
      if (fx.wait) {
        row.status = 'WAITING';
        row.completed_at = null;
        return Object.assign(state, { status: 'WAITING', due_at: fx.wait.dueAt?.toISOString() ?? null, waiting_event: fx.wait.event ?? null });
      }
      if (fx.fail) {
        row.status = 'FAILED';
        row.error = fx.fail;
        return end('FAILED', { error: fx.fail });
      }
      if (fx.exit !== undefined) return end('EXITED', { exit_reason: fx.exit });
      branch = fx.branch;
    }
    const next = graph.next(step.id, branch ?? null);
    if (!next) return end('COMPLETED');
    stepId = next;
  }
  return end('FAILED', { error: `more than ${MAX_STEPS_PER_RUN} steps in one run` });
}

async function loadContacts(tx: Db, ids: string[]): Promise<Map<string, ContactRow>> {
  // The times as ISO strings with milliseconds, as Date.toISOString() wrote them before.
  const { rows } = await tx.execute<{
    id: string;
    email: string;
    subscribed: boolean;
    data: Record<string, unknown>;
    created_at: string;
    updated_at: string;
  }>(sql`
    SELECT id, email, subscribed, data, ${isoMs('created_at')} AS created_at, ${isoMs('updated_at')} AS updated_at
      FROM contacts WHERE id = ANY(${sql.param(ids)}::text[])`);
  return new Map(
    rows.map((r) => [r.id, { id: r.id, email: r.email, subscribed: r.subscribed, data: r.data ?? {}, createdAt: r.created_at, updatedAt: r.updated_at }]),
  );
}

async function loadWaitingRows(tx: Db, executionIds: string[]): Promise<Map<string, { id: string; step_id: string; attempt: number }>> {
  if (executionIds.length === 0) return new Map();
  const { rows } = await tx.execute<{ id: string; execution_id: string; step_id: string; attempt: number }>(sql`
    SELECT id, execution_id, step_id, attempt FROM workflow_step_executions
     WHERE execution_id = ANY(${sql.param(executionIds)}::uuid[]) AND status = 'WAITING'`);
  return new Map(rows.map((r) => [r.execution_id, r]));
}

async function writeResults(tx: Db, now: Date, inserts: NewStepRow[], updates: StepRowUpdate[], execs: ExecUpdate[]): Promise<void> {
  if (inserts.length > 0) {
    await tx.execute(sql`
      INSERT INTO workflow_step_executions (id, execution_id, workflow_id, step_id, project_id, status, attempt, output, error, started_at, completed_at)
      SELECT r.id, r.execution_id, r.workflow_id, r.step_id, r.project_id, r.status, r.attempt, r.output, r.error, r.started_at, r.completed_at
        FROM jsonb_to_recordset(${JSON.stringify(inserts)}::jsonb) AS r(id uuid, execution_id uuid, workflow_id uuid, step_id uuid, project_id text, status text,
             attempt int, output jsonb, error text, started_at timestamptz, completed_at timestamptz)`);
  }
  if (updates.length > 0) {
    await tx.execute(sql`
      UPDATE workflow_step_executions s
         SET status = r.status, output = COALESCE(r.output, s.output), error = r.error, completed_at = r.completed_at
        FROM jsonb_to_recordset(${JSON.stringify(updates)}::jsonb) AS r(id uuid, status text, output jsonb, error text, completed_at timestamptz)
       WHERE s.id = r.id`);
  }
  if (execs.length > 0) {
    await tx.execute(sql`
      UPDATE workflow_executions x
         SET status = r.status, current_step_id = r.current_step_id, context = r.context, due_at = r.due_at,
             waiting_event = r.waiting_event, exit_reason = r.exit_reason, error = r.error, completed_at = r.completed_at,
             lease_until = NULL, updated_at = ${now.toISOString()}::timestamptz
        FROM jsonb_to_recordset(${JSON.stringify(execs)}::jsonb) AS r(id uuid, status text, current_step_id uuid, context jsonb, due_at timestamptz,
             waiting_event text, exit_reason text, error text, completed_at timestamptz)
       WHERE x.id = r.id`);
  }
}
