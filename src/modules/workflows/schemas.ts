import { z } from 'zod';
import type { WorkflowBranch, WorkflowExecutionStatus, WorkflowStepExecutionStatus, WorkflowStepType } from '../../db/schema/workflows.ts';
import { SimpleError } from '../../http/errors.ts';
import { component } from '../../http/openapi.ts';
import { limitParam, pageParams, searchParam } from '../../http/pagination.ts';
import { storableObjectSchema } from '../contacts/custom-data.ts';
import { workflowEventName } from './event-name.ts';

/** An optional text field: null, absent or blank clears it. */
const optionalText = (max: number) => z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? null : v), z.string().trim().max(max).nullable());

const name = z.string().trim().min(1).max(200);

export const createWorkflowBody = z
  .object({
    name,
    description: optionalText(2000).optional(),
    eventName: workflowEventName,
    allowReentry: z.boolean().default(false),
    triggerType: z.literal('EVENT').optional(),
  })
  .strict();

export const updateWorkflowBody = z
  .object({
    name,
    description: optionalText(2000),
    eventName: workflowEventName,
    triggerType: z.literal('EVENT'),
    triggerConfig: z.object({ eventName: workflowEventName }).strict(),
    enabled: z.boolean(),
    allowReentry: z.boolean(),
  })
  .partial()
  .strict();

export type CreateWorkflowInput = z.output<typeof createWorkflowBody>;
export type UpdateWorkflowInput = z.output<typeof updateWorkflowBody>;

/** POST /workflows: a missing name or eventName is the spec's simple 400 body (decisions.md § 1). */
export function assertRequiredWorkflowFields(body: unknown): void {
  const input = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const missing = (['name', 'eventName'] as const).filter((k) => {
    const v = input[k];
    return v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
  });
  if (missing.length === 2) throw new SimpleError('name and eventName are required');
  if (missing.length === 1) throw new SimpleError(`${missing[0]} is required`);
}

const booleanParam = z.preprocess(
  (v) => (v === 'true' ? true : v === 'false' ? false : v === '' ? undefined : v),
  z.boolean({ invalid_type_error: "enabled must be 'true' or 'false'" }).optional(),
);

export const listWorkflowsQuery = pageParams(100).extend({ search: searchParam, enabled: booleanParam });
export type ListWorkflowsQuery = z.output<typeof listWorkflowsQuery>;

export const workflowIdParams = z.object({ id: z.string().max(100) });
export const stepParams = z.object({ id: z.string().max(100), stepId: z.string().max(100) });
export const transitionParams = z.object({ id: z.string().max(100), transitionId: z.string().max(100) });
export const executionParams = z.object({ id: z.string().max(100), executionId: z.string().max(100) });

export const deleteStepQuery = z.object({
  splice: z.preprocess((v) => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' || v === '' ? false : v), z.boolean().default(false)),
});

const position = z.object({ x: z.number().finite(), y: z.number().finite() }).strict().nullable();

/** The step body's outer shape; `config` is checked per type by step-config.ts (400s naming the field). */
export const createStepBody = z
  .object({
    type: z.string(),
    name: optionalText(200).optional(),
    config: z.unknown().optional(),
    position: position.optional(),
  })
  .strict();

export const updateStepBody = z
  .object({
    type: z.string().optional(),
    name: optionalText(200).optional(),
    config: z.unknown().optional(),
    position: position.optional(),
  })
  .strict();

export const BRANCHES = ['yes', 'no', 'event', 'timeout'] as const satisfies readonly WorkflowBranch[];

export const createTransitionBody = z
  .object({
    fromStepId: z.string().max(100),
    toStepId: z.string().max(100),
    branch: z.enum(BRANCHES).nullish(),
  })
  .strict();

export const retargetTransitionBody = z.object({ toStepId: z.string().max(100) }).strict();

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const satisfies readonly WorkflowExecutionStatus[];

const MAX_CONTEXT_BYTES = 64 * 1024;

/** Size of a value as JSON; Infinity when it cannot be serialised (too deep: the data check reports that). */
function jsonBytes(v: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(v));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

export const startExecutionBody = z
  .object({
    contactId: z.string().max(100).optional(),
    email: z.string().trim().toLowerCase().email().max(320).optional(),
    context: storableObjectSchema.refine((c) => jsonBytes(c) <= MAX_CONTEXT_BYTES, 'context can be at most 64 KB of JSON').optional(),
  })
  .strict()
  .refine((b) => (b.contactId === undefined) !== (b.email === undefined), {
    message: 'give exactly one of contactId or email',
    path: ['contactId'],
  });

export const listExecutionsQuery = z.object({
  status: z.preprocess((v) => (typeof v === 'string' ? (v.trim() === '' ? undefined : v.trim().toUpperCase()) : v), z.enum(EXECUTION_STATUSES).optional()),
  limit: limitParam,
  cursor: z.string().max(500).optional(),
});

export type StepCounts = { entered: number; completed: number; waiting: number; failed: number; skipped: number };

export type WorkflowRecord = {
  id: string;
  projectId: string;
  name: string;
  description: string | null;
  triggerType: 'EVENT';
  triggerConfig: { eventName: string };
  eventName: string;
  enabled: boolean;
  allowReentry: boolean;
  createdAt: string;
  updatedAt: string;
};

export type StepRecord = {
  id: string;
  workflowId: string;
  type: WorkflowStepType;
  name: string | null;
  config: Record<string, unknown>;
  position: { x: number; y: number } | null;
  createdAt: string;
  updatedAt: string;
};

export type TransitionRecord = {
  id: string;
  workflowId: string;
  fromStepId: string;
  toStepId: string;
  branch: WorkflowBranch | null;
  createdAt: string;
};

export type WorkflowDetail = WorkflowRecord & {
  steps: (StepRecord & { counts: StepCounts })[];
  transitions: TransitionRecord[];
  activeExecutions: number;
};

export type StepExecutionRecord = {
  id: string;
  stepId: string;
  stepType: WorkflowStepType | null;
  status: WorkflowStepExecutionStatus;
  attempt: number;
  output: Record<string, unknown> | null;
  error: string | null;
  startedAt: string;
  completedAt: string | null;
};

export type ExecutionRecord = {
  id: string;
  workflowId: string;
  contactId: string;
  contact: { id: string; email: string } | null;
  status: WorkflowExecutionStatus;
  currentStepId: string | null;
  context: Record<string, unknown>;
  waitingFor: string | null;
  dueAt: string | null;
  exitReason: string | null;
  error: string | null;
  startedAt: string;
  completedAt: string | null;
  updatedAt: string;
};

// Responses (the document and the strict response check: src/http/openapi.ts)

const nullableTime = z.string().nullable();

export const workflowSchema = component(
  'Workflow',
  z.object({
    id: z.string(),
    projectId: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    triggerType: z.literal('EVENT'),
    triggerConfig: z.object({ eventName: z.string() }),
    eventName: z.string(),
    enabled: z.boolean(),
    allowReentry: z.boolean(),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const stepSchema = component(
  'WorkflowStep',
  z.object({
    id: z.string(),
    workflowId: z.string(),
    type: z.string().describe('SEND_EMAIL, DELAY, WAIT_FOR_EVENT, CONDITION, WEBHOOK, UPDATE_CONTACT or EXIT'),
    name: z.string().nullable(),
    config: z.record(z.unknown()),
    position: z.object({ x: z.number(), y: z.number() }).nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const transitionSchema = component(
  'WorkflowTransition',
  z.object({
    id: z.string(),
    workflowId: z.string(),
    fromStepId: z.string(),
    toStepId: z.string(),
    branch: z.enum(BRANCHES).nullable(),
    createdAt: z.string(),
  }),
);

export const workflowDetailSchema = workflowSchema.extend({
  steps: z.array(
    stepSchema.extend({
      counts: z.object({
        entered: z.number().int(),
        completed: z.number().int(),
        waiting: z.number().int(),
        failed: z.number().int(),
        skipped: z
          .number()
          .int()
          .describe('Executions that passed the step without doing it: an email not sent (unsubscribed or suppressed contact), a wait ended by a cancel'),
      }),
    }),
  ),
  transitions: z.array(transitionSchema),
  activeExecutions: z.number().int(),
});

export const executionSchema = component(
  'WorkflowExecution',
  z.object({
    id: z.string(),
    workflowId: z.string(),
    contactId: z.string(),
    contact: z.object({ id: z.string(), email: z.string() }).nullable(),
    status: z.enum(EXECUTION_STATUSES),
    currentStepId: z.string().nullable(),
    context: z.record(z.unknown()),
    waitingFor: z.string().nullable(),
    dueAt: nullableTime,
    exitReason: z.string().nullable(),
    error: z.string().nullable(),
    startedAt: z.string(),
    completedAt: nullableTime,
    updatedAt: z.string(),
  }),
);

export const executionDetailSchema = executionSchema.extend({
  stepExecutions: z.array(
    z.object({
      id: z.string(),
      stepId: z.string(),
      stepType: z.string().nullable(),
      status: z.string(),
      attempt: z.number().int(),
      output: z.record(z.unknown()).nullable(),
      error: z.string().nullable(),
      startedAt: z.string(),
      completedAt: nullableTime,
    }),
  ),
});

export const workflowFieldsSchema = z.object({
  fields: z.array(
    z
      .object({
        field: z.string(),
        type: z.enum(['string', 'number', 'boolean', 'date']),
        source: z.enum(['contact', 'event']),
        operators: z.array(z.string()),
      })
      .passthrough(),
  ),
});
