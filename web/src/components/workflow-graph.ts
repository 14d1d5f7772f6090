import { herald } from '../api.ts';
import type { Answer } from '../types.ts';

/**
 * The workflow editor's graph edits, each made of the API's own calls (steps and transitions,
 * `DELETE …/steps/:id?splice=true`): the API stays the one place that checks a graph.
 */

export type WorkflowDetail = Answer<'workflows.get'>;
export type Step = WorkflowDetail['steps'][number];
export type Transition = WorkflowDetail['transitions'][number];
export type Branch = NonNullable<Transition['branch']>;

/** The step types a client adds, in the order the editor offers them (TRIGGER comes with the workflow). */
export const STEP_TYPES = ['SEND_EMAIL', 'DELAY', 'CONDITION', 'WAIT_FOR_EVENT', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const STEP_LABELS: Record<string, string> = {
  TRIGGER: 'Trigger',
  SEND_EMAIL: 'Send email',
  DELAY: 'Delay',
  CONDITION: 'Condition',
  WAIT_FOR_EVENT: 'Wait for event',
  WEBHOOK: 'Webhook',
  UPDATE_CONTACT: 'Update contact',
  EXIT: 'Exit',
};

export const BRANCH_LABELS: Record<Branch, string> = { yes: 'Yes', no: 'No', event: 'Event arrived', timeout: 'Timed out' };

/** The ways out of a step of `type` (the API's branch rules): `[null]` one unlabelled exit, `[]` none. */
export function exitsOf(type: string): (Branch | null)[] {
  if (type === 'CONDITION') return ['yes', 'no'];
  if (type === 'WAIT_FOR_EVENT') return ['event', 'timeout'];
  if (type === 'EXIT') return [];
  return [null];
}

/** A place for a new step: after `fromStepId` on `branch`, before the step there now (`before`), if any. */
export type Slot = { fromStepId: string; branch: Branch | null; before: Transition | null };

export function slotsOf(step: Step, transitions: Transition[]): Slot[] {
  return exitsOf(step.type).map((branch) => ({
    fromStepId: step.id,
    branch,
    before: transitions.find((t) => t.fromStepId === step.id && (t.branch ?? null) === branch) ?? null,
  }));
}

export type StepBody = { type: StepType; name: string | null; config: unknown };

/**
 * Adds a step at `slot`: the step, then (when the slot is between two steps) the new step's link to
 * the next one on its first way out (`yes` of a condition, `event` of a wait), then the old link
 * pointed into the new step (one change: an execution of an enabled workflow always finds a link);
 * at the end of a path, the link into it. A failure after the step was made deletes it (with its
 * link on) and rethrows the API's error.
 */
export async function insertStep(workflowId: string, slot: Slot, body: StepBody): Promise<Step['id']> {
  const step = await herald.workflows.addStep(workflowId, body);
  try {
    if (slot.before) {
      const exit = exitsOf(body.type)[0];
      if (exit === undefined) throw new Error(`Nothing can follow ${STEP_LABELS[body.type]}: add it at the end of a path`);
      await herald.workflows.addTransition(workflowId, { fromStepId: step.id, toStepId: slot.before.toStepId, branch: exit });
      await herald.workflows.retargetTransition(workflowId, slot.before.id, { toStepId: step.id });
    } else {
      await herald.workflows.addTransition(workflowId, { fromStepId: slot.fromStepId, toStepId: step.id, branch: slot.branch });
    }
  } catch (err) {
    await herald.workflows.deleteStep(workflowId, step.id).catch(() => undefined);
    throw err;
  }
  return step.id;
}

/** Removes a step and links the steps before it to the one after it (the API's splice). */
export async function removeStep(workflowId: string, stepId: string): Promise<void> {
  await herald.workflows.deleteStep(workflowId, stepId, { splice: true });
}

/** Steps the trigger cannot reach (made through the API, or left by a removed link). */
export function unreachable(steps: Step[], transitions: Transition[]): Step[] {
  const trigger = steps.find((s) => s.type === 'TRIGGER');
  const seen = new Set<string>();
  const queue = trigger ? [trigger.id] : [];
  while (queue.length > 0) {
    const id = queue.pop()!;
    if (seen.has(id)) continue;
    seen.add(id);
    for (const t of transitions) if (t.fromStepId === id) queue.push(t.toStepId);
  }
  return steps.filter((s) => !seen.has(s.id));
}
