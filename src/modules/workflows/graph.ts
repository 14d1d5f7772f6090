import { and, eq, inArray, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { templates } from '../../db/schema/templates.ts';
import { type WorkflowBranch, type WorkflowStepType, workflowSteps, workflowTransitions, workflows } from '../../db/schema/workflows.ts';
import { ApiError, type FieldError, badRequest, conflict, notFound } from '../../http/errors.ts';
import { senderDomainFor } from '../domains/sender.ts';
import type { StepRecord, TransitionRecord } from './schemas.ts';
import { STEP_TYPES, parseStepConfig, stepError } from './step-config.ts';
import { type Graph, type StepRow, describeStep, findWorkflow, loadGraph, toStepRecord, toTransitionRecord } from './store.ts';

/**
 * The workflow graph: steps and transitions, the branch rules of decisions.md § 7 (yes/no out of
 * CONDITION, event/timeout out of WAIT_FOR_EVENT, one exit elsewhere; no self-links, nothing out of
 * EXIT, nothing into TRIGGER, no cycles), `?splice=true`, and the whole-graph check that enabling runs.
 */

const MAX_STEPS = 200;

/**
 * A workflow's steps hold at most this much configuration, as PostgreSQL prints it. The engine
 * loads a workflow's whole graph for each batch it advances, and GET /workflows/:id answers it:
 * 199 CONDITION steps of 900 KB (one step each request, within every other bound) were a 179 MB
 * answer that held the event loop 2 s, and ten at once ran the process out of memory.
 */
export const MAX_WORKFLOW_CONFIG_BYTES = 2 * 1024 * 1024;

/**
 * Throws the 400 when the workflow's steps, with `config` in place of step `replacing` (or added),
 * would hold more than MAX_WORKFLOW_CONFIG_BYTES and more than they do now (a workflow made larger
 * before the bound can shrink). In the transaction that holds the workflow's lock.
 */
async function assertConfigWithinBound(tx: Db, workflowId: string, config: Record<string, unknown>, replacing: string | null): Promise<void> {
  const { rows } = await tx.execute<{ bytes: string; now: string }>(sql`
    SELECT (coalesce(sum(octet_length(config::text)) FILTER (WHERE id IS DISTINCT FROM ${replacing}::uuid), 0)
              + octet_length(${JSON.stringify(config)}::jsonb::text))::bigint AS bytes,
           coalesce(sum(octet_length(config::text)), 0)::bigint AS now
      FROM workflow_steps WHERE workflow_id = ${workflowId}::uuid`);
  const bytes = Number(rows[0].bytes);
  if (bytes <= MAX_WORKFLOW_CONFIG_BYTES || bytes <= Number(rows[0].now)) return;
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  throw badRequest(
    `A workflow's steps can hold at most ${mb(MAX_WORKFLOW_CONFIG_BYTES)} of configuration, and this would make ${mb(bytes)}: shorten its conditions or split the workflow`,
    { maxBytes: MAX_WORKFLOW_CONFIG_BYTES, bytes },
  );
}

/** The branches a step of `type` can leave by; `[null]` = one unlabelled exit, `[]` = none. */
export function branchesOf(type: WorkflowStepType): (WorkflowBranch | null)[] {
  switch (type) {
    case 'CONDITION':
      return ['yes', 'no'];
    case 'WAIT_FOR_EVENT':
      return ['event', 'timeout'];
    case 'EXIT':
      return [];
    default:
      return [null];
  }
}

/** Step ids reachable from `start` (itself included) along the transitions. */
function reachableFrom(start: string, transitions: Graph['transitions']): Set<string> {
  const next = new Map<string, string[]>();
  for (const t of transitions) next.set(t.fromStepId, [...(next.get(t.fromStepId) ?? []), t.toStepId]);
  const seen = new Set([start]);
  const queue = [start];
  while (queue.length > 0) {
    for (const to of next.get(queue.pop()!) ?? []) {
      if (!seen.has(to)) {
        seen.add(to);
        queue.push(to);
      }
    }
  }
  return seen;
}

function stepOf(graph: Graph, stepId: string, field: string): StepRow {
  const step = UUID.test(stepId) ? graph.steps.find((s) => s.id === stepId.toLowerCase()) : undefined;
  if (!step) {
    throw new ApiError(400, 'BAD_REQUEST', `${field} ${stepId} is not a step of this workflow`, {
      errors: [{ field, message: 'not a step of this workflow', code: 'invalid_step' }],
      details: { [field]: stepId },
    });
  }
  return step;
}

function parseType(type: string): (typeof STEP_TYPES)[number] {
  if ((STEP_TYPES as readonly string[]).includes(type)) return type as (typeof STEP_TYPES)[number];
  const hint = type === 'TRIGGER' ? ' (the TRIGGER step is created with the workflow)' : '';
  throw stepError(`Unknown step type '${type.slice(0, 50)}'${hint}: use ${STEP_TYPES.join(', ')}`, [
    { field: 'type', message: `must be one of ${STEP_TYPES.join(', ')}`, code: 'invalid_enum_value' },
  ]);
}

/** The template id a SEND_EMAIL config names (kept in a column, so a used template cannot be deleted). */
const templateOf = (type: WorkflowStepType, config: Record<string, unknown>): string | null =>
  type === 'SEND_EMAIL' && typeof config.templateId === 'string' ? config.templateId : null;

export async function addStep(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  input: { type: string; name?: string | null; config?: unknown; position?: { x: number; y: number } | null },
): Promise<StepRecord> {
  const type = parseType(input.type);
  return withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const config = (await parseStepConfig(ctx, tx, projectId, type, input.config)) as Record<string, unknown>;
    const [{ n }] = await tx
      .select({ n: sql<number>`count(*)::int` })
      .from(workflowSteps)
      .where(eq(workflowSteps.workflowId, workflow.id));
    if (n >= MAX_STEPS) throw badRequest(`A workflow can have at most ${MAX_STEPS} steps`);
    await assertConfigWithinBound(tx, workflow.id, config, null);
    const now = ctx.clock.now();
    const [row] = await tx
      .insert(workflowSteps)
      .values({
        id: uuidv7(now.getTime()),
        workflowId: workflow.id,
        projectId,
        type,
        name: input.name ?? null,
        config,
        position: input.position ?? null,
        templateId: templateOf(type, config),
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    await touch(tx, workflow.id, now);
    return toStepRecord(row);
  });
}

export async function updateStep(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  stepId: string,
  input: { type?: string; name?: string | null; config?: unknown; position?: { x: number; y: number } | null },
): Promise<StepRecord> {
  return withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const step = await findStep(tx, workflow.id, stepId);
    if (input.type !== undefined && input.type !== step.type) {
      throw stepError(`A step's type cannot change (this one is ${step.type}); add a new step instead`, [
        { field: 'type', message: `must be ${step.type}`, code: 'custom' },
      ]);
    }
    if (step.type === 'TRIGGER' && input.config !== undefined) {
      throw badRequest('The TRIGGER step has no config: change the event with PATCH /workflows/:id { eventName }');
    }
    const set: Partial<typeof workflowSteps.$inferInsert> = { updatedAt: ctx.clock.now() };
    if (input.config !== undefined) {
      const config = (await parseStepConfig(ctx, tx, projectId, step.type, input.config)) as Record<string, unknown>;
      await assertConfigWithinBound(tx, workflow.id, config, step.id);
      set.config = config;
      set.templateId = templateOf(step.type, config);
    }
    if (input.name !== undefined) set.name = input.name;
    if (input.position !== undefined) set.position = input.position;
    const [row] = await tx.update(workflowSteps).set(set).where(eq(workflowSteps.id, step.id)).returning();
    await touch(tx, workflow.id, set.updatedAt!);
    return toStepRecord(row);
  });
}

async function findStep(db: Db, workflowId: string, stepId: string): Promise<StepRow> {
  if (!UUID.test(stepId)) throw notFound('workflow_step', stepId);
  const [row] = await db
    .select()
    .from(workflowSteps)
    .where(and(eq(workflowSteps.workflowId, workflowId), eq(workflowSteps.id, stepId.toLowerCase())));
  if (!row) throw notFound('workflow_step', stepId);
  return row;
}

/**
 * Deletes a step and its transitions. With `splice`, every transition into the step is pointed at
 * the step's one successor instead (keeping its branch), so `A → B → C` minus B is `A → C`. A step
 * with two branches cannot be spliced out (which branch would its parents take?). Refused with 409
 * while executions are at the step.
 */
export async function deleteStep(ctx: AppContext, projectId: string, workflowId: string, stepId: string, splice: boolean): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const step = await findStep(tx, workflow.id, stepId);
    if (step.type === 'TRIGGER') throw badRequest('The TRIGGER step cannot be deleted; delete the workflow instead');
    const { rows } = await tx.execute<{ n: number }>(sql`
      SELECT count(*)::int AS n FROM workflow_executions
       WHERE workflow_id = ${workflow.id} AND current_step_id = ${step.id} AND status IN ('RUNNING', 'WAITING')`);
    if (rows[0].n > 0) {
      throw conflict(`${rows[0].n} active execution(s) are at step ${describeStep(step)}; cancel them or wait until they move on`, {
        stepId: step.id,
        activeExecutions: rows[0].n,
      });
    }
    if (splice) {
      const graph = await loadGraph(tx, workflow.id);
      // Branches that all lead to one step (a condition both of whose ways join again) splice
      // like one link: its parents then lead there.
      const successors = [...new Set(graph.transitions.filter((t) => t.fromStepId === step.id).map((t) => t.toStepId))];
      if (successors.length > 1) {
        throw badRequest(
          `Step ${describeStep(step)} leads to ${successors.length} different steps; to splice it out, its branches must lead to one step (remove the steps of all but one branch first)`,
          { stepId: step.id, successors },
        );
      }
      const successor = successors[0];
      if (successor) {
        await tx
          .update(workflowTransitions)
          .set({ toStepId: successor })
          .where(and(eq(workflowTransitions.toStepId, step.id), sql`${workflowTransitions.fromStepId} <> ${successor}`));
      }
    }
    await tx.delete(workflowSteps).where(eq(workflowSteps.id, step.id));
    await touch(tx, workflow.id, ctx.clock.now());
  });
}

/** Adds a transition after the branch rules and the cycle check; 400 naming the rule otherwise. */
export async function addTransition(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  input: { fromStepId: string; toStepId: string; branch?: WorkflowBranch | null },
): Promise<TransitionRecord> {
  return withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const graph = await loadGraph(tx, workflow.id);
    const from = stepOf(graph, input.fromStepId, 'fromStepId');
    const to = stepOf(graph, input.toStepId, 'toStepId');
    const branch = input.branch ?? null;
    const rule = transitionRule(from, to, branch);
    if (from.type === 'EXIT') throw rule(`An EXIT step ends the execution: nothing can follow ${describeStep(from)}`, 'fromStepId');
    assertTarget(from, to, graph.transitions, rule);
    const allowed = branchesOf(from.type);
    if (!allowed.includes(branch)) {
      const expected = allowed[0] === null ? 'no branch' : `branch ${allowed.map((b) => `'${b}'`).join(' or ')}`;
      throw rule(`A transition out of a ${from.type} step takes ${expected}${branch ? `, not '${branch}'` : ''}`);
    }
    const taken = graph.transitions.find((t) => t.fromStepId === from.id && t.branch === branch);
    if (taken) {
      throw rule(
        branch
          ? `${describeStep(from)} already has a '${branch}' branch (transition ${taken.id})`
          : `${describeStep(from)} already has its outgoing transition (transition ${taken.id}); delete it first`,
      );
    }
    const now = ctx.clock.now();
    const [row] = await tx
      .insert(workflowTransitions)
      .values({ id: uuidv7(now.getTime()), workflowId: workflow.id, fromStepId: from.id, toStepId: to.id, branch, createdAt: now })
      .returning();
    await touch(tx, workflow.id, now);
    return toTransitionRecord(row);
  });
}

/** The 400 of a transition that breaks a rule, naming the field at fault. */
const transitionRule =
  (from: StepRow, to: StepRow, branch: WorkflowBranch | null) =>
  (message: string, field = 'branch') =>
    new ApiError(400, 'BAD_REQUEST', message, {
      errors: [{ field, message, code: 'invalid_transition' }],
      details: { fromStepId: from.id, toStepId: to.id, branch },
    });

/** What a link's target must be, made or moved: not its own step, not the TRIGGER, no cycle through the other links. */
function assertTarget(from: StepRow, to: StepRow, others: Graph['transitions'], rule: ReturnType<typeof transitionRule>): void {
  if (from.id === to.id) throw rule('A step cannot link to itself', 'toStepId');
  if (to.type === 'TRIGGER') throw rule('Nothing can link into the TRIGGER step: every execution starts there', 'toStepId');
  if (reachableFrom(to.id, others).has(from.id)) {
    throw rule(`Linking ${describeStep(from)} to ${describeStep(to)} would make a cycle`, 'toStepId');
  }
}

/**
 * Points a transition at another step, in one statement: inserting a step between two is the new
 * step, its link on, then this. With a delete and an add instead, an execution of an enabled
 * workflow leaving the step between the two found no link and completed.
 */
export async function retargetTransition(
  ctx: AppContext,
  projectId: string,
  workflowId: string,
  transitionId: string,
  input: { toStepId: string },
): Promise<TransitionRecord> {
  return withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const graph = await loadGraph(tx, workflow.id);
    const moved = UUID.test(transitionId) ? graph.transitions.find((t) => t.id === transitionId.toLowerCase()) : undefined;
    if (!moved) throw notFound('workflow_transition', transitionId);
    const from = stepOf(graph, moved.fromStepId, 'fromStepId');
    const to = stepOf(graph, input.toStepId, 'toStepId');
    assertTarget(
      from,
      to,
      graph.transitions.filter((t) => t.id !== moved.id),
      transitionRule(from, to, moved.branch),
    );
    const now = ctx.clock.now();
    const [row] = await tx.update(workflowTransitions).set({ toStepId: to.id }).where(eq(workflowTransitions.id, moved.id)).returning();
    await touch(tx, workflow.id, now);
    return toTransitionRecord(row);
  });
}

export async function deleteTransition(ctx: AppContext, projectId: string, workflowId: string, transitionId: string): Promise<void> {
  await withTransaction(ctx.database, async ({ tx }) => {
    const workflow = await findWorkflow(tx, projectId, workflowId, { lock: true });
    const deleted = UUID.test(transitionId)
      ? await tx
          .delete(workflowTransitions)
          .where(and(eq(workflowTransitions.workflowId, workflow.id), eq(workflowTransitions.id, transitionId.toLowerCase())))
          .returning({ id: workflowTransitions.id })
      : [];
    if (deleted.length === 0) throw notFound('workflow_transition', transitionId);
    await touch(tx, workflow.id, ctx.clock.now());
  });
}

async function touch(db: Db, workflowId: string, now: Date): Promise<void> {
  await db.update(workflows).set({ updatedAt: now }).where(eq(workflows.id, workflowId));
}

/**
 * What enabling checks on the whole graph: the trigger leads somewhere, every step has a path
 * from the trigger, every SEND_EMAIL template sends from a verified domain, every CONDITION still
 * holds (fields and segments may have changed since it was saved). 400 naming the first bad step;
 * `errors` lists every problem.
 */
export async function assertRunnable(ctx: AppContext, db: Db, projectId: string, graph: Graph): Promise<void> {
  const problems: { step: StepRow; message: string }[] = [];
  const trigger = graph.steps.find((s) => s.type === 'TRIGGER');
  if (!trigger) throw new ApiError(500, 'INTERNAL_SERVER_ERROR', 'An unexpected error occurred');
  if (!graph.transitions.some((t) => t.fromStepId === trigger.id)) {
    problems.push({ step: trigger, message: 'the trigger leads to no step: add a step and a transition from the TRIGGER step' });
  }
  const reachable = reachableFrom(trigger.id, graph.transitions);
  for (const step of graph.steps) {
    if (!reachable.has(step.id)) problems.push({ step, message: `step ${describeStep(step)} has no path from the trigger` });
  }
  const templateIds = [...new Set(graph.steps.map((s) => s.templateId).filter((id): id is string => id !== null))];
  const used = templateIds.length
    ? await db.select({ id: templates.id, name: templates.name, from: templates.fromEmail }).from(templates).where(inArray(templates.id, templateIds))
    : [];
  for (const step of graph.steps) {
    if (step.type === 'SEND_EMAIL') {
      const template = used.find((t) => t.id === step.templateId);
      if (!template) {
        problems.push({ step, message: `step ${describeStep(step)} has no template` });
        continue;
      }
      try {
        await senderDomainFor(ctx, projectId, template.from);
      } catch (err) {
        if (!(err instanceof ApiError) || err.statusCode !== 403) throw err;
        problems.push({ step, message: `step ${describeStep(step)} sends template "${template.name}" from ${template.from}: ${err.message}` });
      }
    }
    if (step.type === 'CONDITION') {
      try {
        await parseStepConfig(ctx, db, projectId, 'CONDITION', step.config);
      } catch (err) {
        if (!(err instanceof ApiError) || err.statusCode !== 400) throw err;
        problems.push({ step, message: `step ${describeStep(step)}: ${err.message}` });
      }
    }
  }
  if (problems.length === 0) return;
  const errors: FieldError[] = problems.map((p) => ({ field: `steps.${p.step.id}`, message: p.message, code: 'invalid_step' }));
  const first = problems[0];
  throw new ApiError(400, 'BAD_REQUEST', `The workflow cannot be enabled: ${first.message}`, {
    errors,
    details: { stepId: first.step.id, stepType: first.step.type, stepName: first.step.name },
  });
}
