import { sql } from 'drizzle-orm';
import { bigint, boolean, check, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { contacts } from './contacts.ts';
import { templates } from './templates.ts';
import { projects } from './users.ts';

export type WorkflowStepType = 'TRIGGER' | 'SEND_EMAIL' | 'DELAY' | 'WAIT_FOR_EVENT' | 'CONDITION' | 'WEBHOOK' | 'UPDATE_CONTACT' | 'EXIT';

/** `yes`/`no` leave a CONDITION step, `event`/`timeout` a WAIT_FOR_EVENT step; other steps have one unlabelled exit. */
export type WorkflowBranch = 'yes' | 'no' | 'event' | 'timeout';

export type WorkflowExecutionStatus = 'RUNNING' | 'WAITING' | 'COMPLETED' | 'EXITED' | 'FAILED' | 'CANCELLED';

export type WorkflowStepExecutionStatus = 'RUNNING' | 'COMPLETED' | 'FAILED' | 'WAITING' | 'SKIPPED';

/** A workflow: an event trigger and a graph of steps walked once per contact entry. */
export const workflows = pgTable(
  'workflows',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    triggerType: text('trigger_type').$type<'EVENT'>().notNull().default('EVENT'),
    eventName: text('event_name').notNull(),
    enabled: boolean('enabled').notNull().default(false),
    allowReentry: boolean('allow_reentry').notNull().default(false),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('workflows_project_created_idx').on(t.projectId, t.createdAt, t.id),
    // Enrolment looks up the enabled workflows an event name triggers.
    index('workflows_project_event_enabled_idx')
      .on(t.projectId, t.eventName)
      .where(sql`enabled`),
  ],
);

/** One node of a workflow graph. Its config is validated per type by the API (step-config.ts). */
export const workflowSteps = pgTable(
  'workflow_steps',
  {
    id: uuid('id').primaryKey(),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    type: text('type').$type<WorkflowStepType>().notNull(),
    name: text('name'),
    config: jsonb('config')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    /** Where a graph editor drew the node ({ x, y }); not used by the engine. */
    position: jsonb('position').$type<{ x: number; y: number } | null>(),
    /** SEND_EMAIL's template, as a real reference: deleting a template a step uses is refused. */
    templateId: uuid('template_id').references(() => templates.id, { onDelete: 'restrict' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('workflow_steps_workflow_idx').on(t.workflowId, t.createdAt, t.id),
    index('workflow_steps_template_idx')
      .on(t.templateId)
      .where(sql`template_id IS NOT NULL`),
    // Usage lookups (fields, event names) scan one project's steps of a type.
    index('workflow_steps_project_type_idx').on(t.projectId, t.type),
  ],
);

/** A directed edge between two steps of the same workflow, labelled with a branch where the source has two exits. */
export const workflowTransitions = pgTable(
  'workflow_transitions',
  {
    id: uuid('id').primaryKey(),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    fromStepId: uuid('from_step_id')
      .notNull()
      .references(() => workflowSteps.id, { onDelete: 'cascade' }),
    toStepId: uuid('to_step_id')
      .notNull()
      .references(() => workflowSteps.id, { onDelete: 'cascade' }),
    branch: text('branch').$type<WorkflowBranch>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    // One exit per (step, branch): a second `yes` or a second plain exit is refused by the database too.
    uniqueIndex('workflow_transitions_from_branch_key').on(t.fromStepId, sql`coalesce(${t.branch}, '')`),
    index('workflow_transitions_workflow_idx').on(t.workflowId),
    index('workflow_transitions_to_idx').on(t.toStepId),
    check('workflow_transitions_no_self_link', sql`${t.fromStepId} <> ${t.toStepId}`),
  ],
);

/** One contact's walk through a workflow (one row per entry). `due_at` is the durable timer / next run. */
export const workflowExecutions = pgTable(
  'workflow_executions',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    contactId: text('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    status: text('status').$type<WorkflowExecutionStatus>().notNull(),
    currentStepId: uuid('current_step_id'),
    /** The triggering event's data merged with the start call's context; WAIT_FOR_EVENT adds the awaited event's data. */
    context: jsonb('context')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    /** How many workflow-caused events led here (a guard so two workflows cannot trigger each other forever). */
    depth: integer('depth').notNull().default(0),
    dueAt: timestamp('due_at', { withTimezone: true, mode: 'date' }),
    waitingEvent: text('waiting_event'),
    leaseUntil: timestamp('lease_until', { withTimezone: true, mode: 'date' }),
    exitReason: text('exit_reason'),
    error: text('error'),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    // At most one active execution per workflow and contact.
    uniqueIndex('workflow_executions_active_key')
      .on(t.workflowId, t.contactId)
      .where(sql`status IN ('RUNNING', 'WAITING')`),
    index('workflow_executions_workflow_contact_idx').on(t.workflowId, t.contactId),
    // The API's execution list: newest first within a workflow, optionally by status.
    index('workflow_executions_workflow_started_idx').on(t.workflowId, t.startedAt, t.id),
    // The list of one ending: its newest page without reading past the executions that ended
    // otherwise (COMPLETED too: a workflow whose paths mostly EXIT has few). An execution ends
    // once, so the runner's writes add no entry here while it walks.
    index('workflow_executions_workflow_ended_idx')
      .on(t.workflowId, t.status, t.startedAt, t.id)
      .where(sql`status IN ('COMPLETED', 'EXITED', 'FAILED', 'CANCELLED')`),
    // The durable timer: due executions are claimed in due_at order.
    index('workflow_executions_due_idx')
      .on(t.dueAt)
      .where(sql`status IN ('RUNNING', 'WAITING')`),
    // WAIT_FOR_EVENT resumption: waiting executions of a contact for an event name.
    index('workflow_executions_waiting_event_idx')
      .on(t.projectId, t.contactId, t.waitingEvent)
      .where(sql`status = 'WAITING'`),
    index('workflow_executions_contact_idx').on(t.contactId),
    // One project's active executions by due time: the runner's fair claim (each project's oldest
    // due ones, engine/claim.ts) and GET /activity/upcoming (one project's waiting timers, soonest first).
    index('workflow_executions_project_due_idx')
      .on(t.projectId, t.dueAt)
      .where(sql`status IN ('RUNNING', 'WAITING')`),
  ],
);

/** One run of one step within an execution: status, output, error, timestamps. */
export const workflowStepExecutions = pgTable(
  'workflow_step_executions',
  {
    id: uuid('id').primaryKey(),
    executionId: uuid('execution_id')
      .notNull()
      .references(() => workflowExecutions.id, { onDelete: 'cascade' }),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    stepId: uuid('step_id').notNull(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    status: text('status').$type<WorkflowStepExecutionStatus>().notNull(),
    attempt: integer('attempt').notNull().default(1),
    output: jsonb('output').$type<Record<string, unknown>>(),
    error: text('error'),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('workflow_step_executions_execution_idx').on(t.executionId, t.startedAt, t.id),
    // Per-step counts on GET /workflows/:id.
    index('workflow_step_executions_workflow_step_idx').on(t.workflowId, t.stepId, t.status),
  ],
);

/** The step of workflow_execution_counts' rows that are not WAITING (a key column cannot be NULL). */
export const NO_STEP = '00000000-0000-0000-0000-000000000000';

/**
 * The exact number of a workflow's executions per status, and of its WAITING ones per current step
 * (`step_id`, NO_STEP for the other statuses), for GET /workflows/:id and the `total` of its
 * executions list: a count of the executions grows with the workflow's history. Kept by
 * statement-level triggers on workflow_executions (migration 0019: inserts, updates, deletes and
 * cascades). A row per writing backend (`shard` = its pid; 0 = folded), as email_counts.
 */
export const workflowExecutionCounts = pgTable(
  'workflow_execution_counts',
  {
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    status: text('status').$type<WorkflowExecutionStatus>().notNull(),
    stepId: uuid('step_id').notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workflowId, t.status, t.stepId, t.shard] })],
);

/**
 * The exact number of step executions per workflow, step and status, for the per-step counts of
 * GET /workflows/:id. Kept by statement-level triggers on workflow_step_executions (migration 0019).
 */
export const workflowStepCounts = pgTable(
  'workflow_step_counts',
  {
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    stepId: uuid('step_id').notNull(),
    status: text('status').$type<WorkflowStepExecutionStatus>().notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.workflowId, t.stepId, t.status, t.shard] })],
);
