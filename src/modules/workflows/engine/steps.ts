import type { WorkflowBranch } from '../../../db/schema/workflows.ts';
import { ApiError } from '../../../http/errors.ts';
import type { Condition } from '../../../conditions/index.ts';
import { updateContact, updateContactsData } from '../../contacts/service.ts';
import { senderDomainFor } from '../../domains/sender.ts';
import { initialStatus } from '../../emails/send.ts';
import { scheduleSegmentReevaluation } from '../../segments/membership.ts';
import { findTemplate } from '../../templates/service.ts';
import type { TemplateRecord } from '../../templates/schemas.ts';
import { type DelayConfig, type ExitConfig, type SendEmailConfig, type UpdateContactConfig, type WaitForEventConfig, delayMs } from '../step-config.ts';
import type { ClaimedExecution, ContactRow, ExecUpdate, NewStepRow } from './advance.ts';
import { type BatchState, countWorkflowEmail, fieldTypesFor, readOnce } from './batch.ts';
import { conditionHolds } from './condition.ts';
import { withSavepointTimeout } from '../../../db/statement-timeout.ts';
import { CONTACT_CONDITION_STATEMENT_MS } from '../../../conditions/time-bound.ts';
import { withWorkflowDepth } from './enrol.ts';
import type { RunStep } from './graph.ts';

/** One executor per step type. Each fills its step row's output and says where the walk goes next. */

export type StepEffects = {
  /** The branch to follow (null: the single exit). */
  branch?: WorkflowBranch | null;
  /** Stop here: the step row stays WAITING until `dueAt` (a timer) or the named event. */
  wait?: { dueAt: Date | null; event?: string };
  /** The step failed: the execution ends FAILED with this reason. */
  fail?: string;
  /** Not run in this batch: the execution stays at this step, due now, for a later batch. */
  later?: true;
  /** An EXIT step: the execution ends EXITED with this reason. */
  exit?: string;
  /** The execution context after the step. */
  context?: Record<string, unknown>;
};

export type StepInput = {
  execution: ClaimedExecution;
  step: RunStep;
  row: NewStepRow;
  contacts: Map<string, ContactRow>;
  context: Record<string, unknown>;
};

export async function runStep(b: BatchState, s: StepInput): Promise<StepEffects> {
  switch (s.step.type) {
    case 'TRIGGER':
      return { branch: null };
    case 'DELAY': {
      const dueAt = new Date(b.now.getTime() + delayMs(s.step.config as DelayConfig));
      s.row.output = { until: dueAt.toISOString() };
      return { wait: { dueAt } };
    }
    case 'WAIT_FOR_EVENT': {
      const c = s.step.config as WaitForEventConfig;
      const dueAt = c.timeout ? new Date(b.now.getTime() + c.timeout * 1000) : null;
      s.row.output = { eventName: c.eventName, timeoutAt: dueAt?.toISOString() ?? null };
      return { wait: { dueAt, event: c.eventName } };
    }
    case 'WEBHOOK':
      // The call happens in webhook-step.ts once this is committed; the row id is its Idempotency-Key.
      return { wait: { dueAt: b.now } };
    case 'CONDITION':
      return condition(b, s);
    case 'SEND_EMAIL':
      return sendEmail(b, s);
    case 'UPDATE_CONTACT':
      return updateContactStep(b, s);
    case 'EXIT': {
      const reason = (s.step.config as ExitConfig).reason || 'exit step';
      s.row.output = { reason };
      return { exit: reason };
    }
    default:
      return { fail: `unknown step type ${String(s.step.type)}` };
  }
}

/**
 * The database part of a CONDITION runs inside the batch's transaction, beside every project's
 * executions of the batch, so it is bounded: in a savepoint, each statement cancelled past
 * CONTACT_CONDITION_STATEMENT_MS (the execution then ends FAILED with the reason), and a project
 * whose conditions took CONDITION_BATCH_BUDGET_MS of this batch leaves its next ones for a later
 * batch.
 */
const CONDITION_BATCH_BUDGET_MS = 1_000;

/** Projects whose CONDITION reads spent this batch's budget (one whose read was cancelled spent more than it). */
export const projectsPastConditionBudget = (b: BatchState): string[] =>
  [...b.conditionMs].filter(([, ms]) => ms >= CONDITION_BATCH_BUDGET_MS).map(([projectId]) => projectId);

const TOO_SLOW = `Evaluating the condition for this contact took longer than ${CONTACT_CONDITION_STATEMENT_MS / 1000} s: use fewer or simpler filters`;

async function condition(b: BatchState, s: StepInput): Promise<StepEffects> {
  const projectId = s.execution.project_id;
  const contact = s.contacts.get(s.execution.contact_id)!;
  const types = await fieldTypesFor(b, projectId);
  const answer = await conditionHolds(b.tx, projectId, s.step.config as unknown as Condition, contact, s.context, { types, now: b.now }, async (read) => {
    const spent = b.conditionMs.get(projectId) ?? 0;
    if (spent >= CONDITION_BATCH_BUDGET_MS) return { later: true } as const;
    const started = performance.now();
    const r = await withSavepointTimeout(b.tx, CONTACT_CONDITION_STATEMENT_MS, read);
    b.conditionMs.set(projectId, spent + performance.now() - started);
    return 'value' in r ? r.value : ({ fail: TOO_SLOW } as const);
  });
  if (typeof answer !== 'boolean') return answer;
  s.row.output = { result: answer, branch: answer ? 'yes' : 'no' };
  return { branch: answer ? 'yes' : 'no' };
}

// Templates within a batch: a batch of one workflow's executions reads each template once.
const templateFor = (b: BatchState, projectId: string, id: string): Promise<TemplateRecord | null> =>
  readOnce(b.templates, id, () => findTemplate(b.tx, projectId, id));

/**
 * Queues the email through queueEmails at the end of the batch (advance.ts), so the sender check,
 * subscription rule, suppression list, throttle and exactly-once delivery are those of every email.
 * The monthly `workflows` billing cap is checked here, in the batch's transaction: over it, the
 * step fails the execution with the reason.
 */
async function sendEmail(b: BatchState, s: StepInput): Promise<StepEffects> {
  const c = s.step.config as SendEmailConfig;
  const e = s.execution;
  const template = await templateFor(b, e.project_id, c.templateId);
  if (!template) return { fail: `template ${c.templateId} no longer exists` };
  try {
    await senderDomainFor(b.ctx, e.project_id, template.from);
  } catch (err) {
    if (err instanceof ApiError) return { fail: err.message };
    throw err;
  }
  const contact = s.contacts.get(e.contact_id)!;
  const custom = c.recipient?.type === 'CUSTOM' ? c.recipient.email : null;
  // A fixed address (a team notification) is not the contact: no subscription rule, contact shown as `contact`.
  const status = custom ? { status: 'QUEUED' as const, error: null } : initialStatus(template.type, contact.subscribed);
  // Billing category `workflows`: an email the cap refuses fails the execution with the reason (a skipped one is not counted).
  if (status.status === 'QUEUED') {
    const refused = await countWorkflowEmail(b, e.project_id);
    if (refused) return { fail: refused };
  }
  s.row.output = { templateId: template.id, to: custom ?? contact.email, ...(status.status === 'SKIPPED' ? { reason: status.error } : {}) };
  b.emails.push({
    row: s.row,
    email: {
      projectId: e.project_id,
      contactId: custom ? null : contact.id,
      to: { email: custom ?? contact.email },
      from: { email: template.from, name: template.fromName },
      replyTo: template.replyTo,
      // A team notification is not mail to a contact: no subscription rule, no unsubscribe link.
      type: custom ? 'TRANSACTIONAL' : template.type,
      subjectSource: template.subject,
      content: {
        bodySource: template.body,
        variables: custom ? { event: s.context, contact: { id: contact.id, email: contact.email, data: contact.data } } : { event: s.context },
      },
      templateId: template.id,
      workflowId: e.workflow_id,
      ...status,
      checkSuppression: true,
    },
  });
  return { branch: null };
}

/** Through the contacts service's update (the one custom-data merge); events it emits carry depth + 1. */
async function updateContactStep(b: BatchState, s: StepInput): Promise<StepEffects> {
  const c = s.step.config as UpdateContactConfig;
  const e = s.execution;
  const input = { data: c.data, subscribed: c.subscribed };
  const update = () => updateContact(b.tx, e.project_id, e.contact_id, input, { now: b.now });
  // Only a subscription change writes an event (which could start workflows): only then is the depth needed.
  const updated = c.subscribed === undefined ? await update() : await withWorkflowDepth(b.tx, e.depth + 1, update);
  s.contacts.set(e.contact_id, { ...s.contacts.get(e.contact_id)!, subscribed: updated.subscribed, data: updated.data, updatedAt: updated.updatedAt });
  await scheduleSegmentReevaluation(b.ctx, e.project_id, e.contact_id, b.client);
  s.row.output = { data: Object.keys(c.data ?? {}), ...(c.subscribed !== undefined ? { subscribed: updated.subscribed } : {}) };
  return { branch: null };
}

/** A walk stopped at an UPDATE_CONTACT step whose change is written with the batch's others (advance.ts). */
export type PausedWalk = { execution: ClaimedExecution; state: ExecUpdate; pausedAt: RunStep; row: NewStepRow; steps: number };

/** Whether this UPDATE_CONTACT waits for updateContactsTogether: a data-only change (no event) of a contact with no other execution in the batch. */
export const updatesTogether = (b: BatchState, e: ClaimedExecution, step: RunStep): boolean =>
  step.type === 'UPDATE_CONTACT' && (step.config as UpdateContactConfig).subscribed === undefined && !b.sharedContacts.has(e.contact_id);

/** The paused walks' UPDATE_CONTACT changes: one statement per step (contacts service), then each contact's segment re-evaluation. */
export async function updateContactsTogether(b: BatchState, paused: PausedWalk[], contacts: Map<string, ContactRow>): Promise<void> {
  const byStep = new Map<string, PausedWalk[]>();
  for (const p of paused) {
    const group = byStep.get(p.pausedAt.id);
    if (group) group.push(p);
    else byStep.set(p.pausedAt.id, [p]);
  }
  for (const group of byStep.values()) {
    const { pausedAt, execution } = group[0];
    const c = pausedAt.config as UpdateContactConfig;
    const ids = group.map((p) => p.execution.contact_id);
    const updated = await updateContactsData(b.tx, execution.project_id, ids, c.data, { now: b.now });
    for (const p of group) {
      const id = p.execution.contact_id;
      const u = updated.get(id)!;
      contacts.set(id, { ...contacts.get(id)!, subscribed: u.subscribed, data: u.data, updatedAt: u.updatedAt });
      await scheduleSegmentReevaluation(b.ctx, p.execution.project_id, id, b.client);
      p.row.output = { data: Object.keys(c.data ?? {}) };
    }
  }
}
