import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { cursorList, describer, pageListOf, simpleOrErrorSchema } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { cancelAllWorkflowExecutions, cancelWorkflowExecution, getExecution, listExecutions, startWorkflowExecution } from './executions.ts';
import { workflowFields } from './fields.ts';
import { addStep, addTransition, deleteStep, deleteTransition, retargetTransition, updateStep } from './graph.ts';
import {
  assertRequiredWorkflowFields,
  createStepBody,
  createTransitionBody,
  createWorkflowBody,
  deleteStepQuery,
  executionDetailSchema,
  executionParams,
  executionSchema,
  listExecutionsQuery,
  listWorkflowsQuery,
  startExecutionBody,
  stepParams,
  stepSchema,
  retargetTransitionBody,
  transitionParams,
  transitionSchema,
  updateStepBody,
  updateWorkflowBody,
  workflowDetailSchema,
  workflowFieldsSchema,
  workflowIdParams,
  workflowSchema,
} from './schemas.ts';
import { createWorkflow, deleteWorkflow, getWorkflow, listWorkflows, updateWorkflow } from './service.ts';
import { CASCADE_DELETES_PER_PROCESS, CASCADE_DELETES_PER_PROJECT, WORKFLOW_DELETE_BATCH } from './delete.ts';
import { stepError } from './step-config.ts';
import { fieldErrors } from '../../http/errors.ts';

/** Step and transition bodies answer every problem with 400 naming the field, like step configs (decisions § 7). */
function parseGraphInput<S extends z.ZodTypeAny>(schema: S, body: unknown, what: 'step' | 'transition'): z.output<S> {
  const r = schema.safeParse(body ?? {});
  if (r.success) return r.data;
  const errors = fieldErrors(r.error);
  throw stepError(`Invalid ${what}: ${errors[0].field || 'body'} ${errors[0].message}`, errors);
}

const fieldsQuery = z.object({ workflowId: z.string().max(100).optional() });

export function workflowRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Workflows', 'project');
  const pid = (req: Parameters<typeof projectOf>[0]) => projectOf(req).projectId;

  app.get(
    '/workflows',
    {
      schema: doc({ operationId: 'workflows.list', summary: 'List workflows', query: listWorkflowsQuery, responses: { 200: pageListOf(workflowSchema) } }),
      onRequest,
    },
    async (req) => listWorkflows(ctx, pid(req), parse(listWorkflowsQuery, req.query)),
  );

  app.get(
    '/workflows/fields',
    {
      schema: doc({
        operationId: 'workflows.fields',
        summary: 'Fields a CONDITION step can test',
        query: fieldsQuery,
        responses: { 200: workflowFieldsSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => workflowFields(ctx, pid(req), parse(fieldsQuery, req.query).workflowId),
  );

  app.post(
    '/workflows',
    {
      schema: doc({
        operationId: 'workflows.create',
        summary: 'Create a workflow triggered by an event (starts disabled)',
        body: createWorkflowBody,
        bodyExample: { name: 'Onboarding', eventName: 'signed-up', allowReentry: false },
        responses: { 201: workflowDetailSchema, 400: { schema: simpleOrErrorSchema, description: 'A required field is missing: the simple body `{ error }`' } },
        errors: [403],
      }),
      onRequest,
    },
    async (req, reply) => {
      assertRequiredWorkflowFields(req.body);
      return reply.status(201).send(await createWorkflow(ctx, pid(req), parse(createWorkflowBody, req.body)));
    },
  );

  app.get(
    '/workflows/:id',
    {
      schema: doc({
        operationId: 'workflows.get',
        summary: 'A workflow with its steps, transitions and counts',
        params: workflowIdParams,
        responses: { 200: workflowDetailSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => getWorkflow(ctx, pid(req), parse(workflowIdParams, req.params).id),
  );

  app.patch(
    '/workflows/:id',
    {
      schema: doc({
        operationId: 'workflows.update',
        summary: 'Rename, enable or disable a workflow',
        params: workflowIdParams,
        body: updateWorkflowBody,
        responses: { 200: workflowDetailSchema },
        errors: [400, 403, 404, 409],
      }),
      onRequest,
    },
    async (req) => updateWorkflow(ctx, pid(req), parse(workflowIdParams, req.params).id, parse(updateWorkflowBody, req.body ?? {})),
  );

  app.delete(
    '/workflows/:id',
    {
      schema: doc({
        operationId: 'workflows.delete',
        summary: 'Delete a workflow',
        description: `Deletes the workflow with its steps, transitions and finished executions; a 409 with \`details.activeExecutions\` while executions are running or waiting. A workflow with more than ${WORKFLOW_DELETE_BATCH.first} executions is disabled first (nothing new enters it), then its executions are deleted in short batches before it: at most ${CASCADE_DELETES_PER_PROJECT} such delete of a project at once (of big workflows and segments; ${CASCADE_DELETES_PER_PROCESS} of all projects, per process), another is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s (executions locked by other writes) stops the delete with a 409 whose \`details.deletedExecutions\` counts the executions deleted; the workflow stays, disabled: ask again to finish.`,
        params: workflowIdParams,
        responses: { 204: null },
        errors: [404, 409, 429],
      }),
      onRequest,
    },
    async (req, reply) => {
      await deleteWorkflow(ctx, pid(req), parse(workflowIdParams, req.params).id);
      return reply.status(204).send();
    },
  );

  app.post(
    '/workflows/:id/steps',
    {
      schema: doc({
        operationId: 'workflows.addStep',
        summary: 'Add a step',
        params: workflowIdParams,
        body: createStepBody,
        bodyExample: { type: 'DELAY', config: { amount: 1, unit: 'days' } },
        responses: { 201: stepSchema },
        errors: [400, 404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(workflowIdParams, req.params);
      return reply.status(201).send(await addStep(ctx, pid(req), id, parseGraphInput(createStepBody, req.body, 'step')));
    },
  );

  app.patch(
    '/workflows/:id/steps/:stepId',
    {
      schema: doc({
        operationId: 'workflows.updateStep',
        summary: 'Change a step',
        params: stepParams,
        body: updateStepBody,
        responses: { 200: stepSchema },
        errors: [400, 404, 409],
      }),
      onRequest,
    },
    async (req) => {
      const { id, stepId } = parse(stepParams, req.params);
      return updateStep(ctx, pid(req), id, stepId, parseGraphInput(updateStepBody, req.body, 'step'));
    },
  );

  app.delete(
    '/workflows/:id/steps/:stepId',
    {
      schema: doc({
        operationId: 'workflows.deleteStep',
        summary: 'Remove a step (splice=true reconnects its neighbours)',
        params: stepParams,
        query: deleteStepQuery,
        responses: { 204: null },
        errors: [400, 404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id, stepId } = parse(stepParams, req.params);
      await deleteStep(ctx, pid(req), id, stepId, parse(deleteStepQuery, req.query).splice);
      return reply.status(204).send();
    },
  );

  app.post(
    '/workflows/:id/transitions',
    {
      schema: doc({
        operationId: 'workflows.addTransition',
        summary: 'Connect two steps',
        params: workflowIdParams,
        body: createTransitionBody,
        responses: { 201: transitionSchema },
        errors: [400, 404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(workflowIdParams, req.params);
      return reply.status(201).send(await addTransition(ctx, pid(req), id, parseGraphInput(createTransitionBody, req.body, 'transition')));
    },
  );

  app.patch(
    '/workflows/:id/transitions/:transitionId',
    {
      schema: doc({
        operationId: 'workflows.retargetTransition',
        summary: 'Point a connection at another step',
        description:
          'Moves the transition to `toStepId`, keeping its step and branch, in one change: to insert a step between two, add the step and its link to the next, then point the link into it here (no moment without a link for an execution to find).',
        params: transitionParams,
        body: retargetTransitionBody,
        responses: { 200: transitionSchema },
        errors: [400, 404, 409],
      }),
      onRequest,
    },
    async (req) => {
      const { id, transitionId } = parse(transitionParams, req.params);
      return retargetTransition(ctx, pid(req), id, transitionId, parseGraphInput(retargetTransitionBody, req.body, 'transition'));
    },
  );

  app.delete(
    '/workflows/:id/transitions/:transitionId',
    {
      schema: doc({
        operationId: 'workflows.deleteTransition',
        summary: 'Remove a connection',
        params: transitionParams,
        responses: { 204: null },
        errors: [404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id, transitionId } = parse(transitionParams, req.params);
      await deleteTransition(ctx, pid(req), id, transitionId);
      return reply.status(204).send();
    },
  );

  app.post(
    '/workflows/:id/executions',
    {
      schema: doc({
        operationId: 'workflows.startExecution',
        summary: 'Start the workflow for one contact',
        params: workflowIdParams,
        body: startExecutionBody,
        responses: { 201: executionSchema },
        errors: [400, 402, 404, 409],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { id } = parse(workflowIdParams, req.params);
      return reply.status(201).send(await startWorkflowExecution(ctx, pid(req), id, parse(startExecutionBody, req.body ?? {})));
    },
  );

  app.get(
    '/workflows/:id/executions',
    {
      schema: doc({
        operationId: 'workflows.listExecutions',
        summary: 'Executions, newest first',
        params: workflowIdParams,
        query: listExecutionsQuery,
        responses: { 200: cursorList(executionSchema) },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => listExecutions(ctx, pid(req), parse(workflowIdParams, req.params).id, parse(listExecutionsQuery, req.query)),
  );

  app.post(
    '/workflows/:id/executions/cancel-all',
    {
      schema: doc({
        operationId: 'workflows.cancelAllExecutions',
        answeredWhenDiskFull: true,
        summary: 'Cancel every running or waiting execution',
        params: workflowIdParams,
        responses: { 200: z.object({ cancelled: z.number().int() }) },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => cancelAllWorkflowExecutions(ctx, pid(req), parse(workflowIdParams, req.params).id),
  );

  app.get(
    '/workflows/:id/executions/:executionId',
    {
      schema: doc({
        operationId: 'workflows.getExecution',
        summary: 'An execution with its step history',
        params: executionParams,
        responses: { 200: executionDetailSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const { id, executionId } = parse(executionParams, req.params);
      return getExecution(ctx, pid(req), id, executionId);
    },
  );

  app.delete(
    '/workflows/:id/executions/:executionId',
    {
      schema: doc({
        operationId: 'workflows.cancelExecution',
        summary: 'Cancel one execution',
        params: executionParams,
        responses: { 200: executionSchema },
        errors: [404, 409],
      }),
      onRequest,
    },
    async (req) => {
      const { id, executionId } = parse(executionParams, req.params);
      return cancelWorkflowExecution(ctx, pid(req), id, executionId);
    },
  );
}
