import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { asHeavyRead } from '../../http/heavy-reads.ts';
import { describer, simpleOrErrorSchema } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { addMembers, removeMembers } from './members.ts';
import { computeSegment } from './membership.ts';
import {
  addMembersBody,
  computedSchema,
  createSegmentBody,
  membersAddedSchema,
  membersRemovedSchema,
  parseCreateSegment,
  refreshedSchema,
  removeMembersBody,
  segmentContactsQuery,
  segmentContactsSchema,
  segmentIdParams,
  segmentSchema,
  updateSegmentBody,
} from './schemas.ts';
import {
  HEAVY_SEGMENTS_LIST,
  SEGMENT_DELETE_BATCH,
  countCondition,
  createSegment,
  deleteSegment,
  getSegment,
  listSegmentContacts,
  listSegments,
  refreshSegment,
  updateSegment,
} from './service.ts';
import { CASCADE_DELETES_PER_PROCESS, CASCADE_DELETES_PER_PROJECT } from '../workflows/delete.ts';

export function segmentRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Segments', 'project');
  const db = ctx.database.db;
  const idOf = (params: unknown) => parse(segmentIdParams, params).id;

  app.get(
    '/segments',
    {
      schema: doc({
        operationId: 'segments.list',
        summary: 'Every segment, newest first (not paginated)',
        description: HEAVY_SEGMENTS_LIST,
        responses: { 200: z.array(segmentSchema) },
        errors: [503],
      }),
      onRequest,
    },
    async (req, reply) => reply.type('application/json; charset=utf-8').send(await listSegments(ctx, projectOf(req).projectId)),
  );

  app.post(
    '/segments',
    {
      schema: doc({
        operationId: 'segments.create',
        summary: 'Create a DYNAMIC (condition) or STATIC (member list) segment',
        body: createSegmentBody,
        bodyExample: { name: 'Pro users', condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] } },
        responses: {
          201: segmentSchema,
          400: {
            schema: simpleOrErrorSchema,
            description: 'Missing name or condition: the simple body `{ error }`; an invalid condition: the full error body',
          },
        },
      }),
      onRequest,
    },
    async (req, reply) => {
      const segment = await createSegment(ctx, projectOf(req).projectId, parseCreateSegment(req.body));
      return reply.status(201).send(segment);
    },
  );

  const countBody = z.object({ condition: z.unknown() });
  app.post(
    '/segments/count',
    {
      schema: doc({
        operationId: 'segments.count',
        answeredWhenDiskFull: true,
        summary: 'Count the contacts a condition matches now, without saving a segment',
        body: countBody,
        bodyExample: { condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] } },
        responses: { 200: z.object({ count: z.number().int() }) },
        errors: [400],
      }),
      onRequest,
    },
    async (req) => countCondition(ctx, projectOf(req).projectId, parse(countBody, req.body ?? {}).condition),
  );

  app.get(
    '/segments/:id',
    {
      schema: doc({ operationId: 'segments.get', summary: 'Get a segment', params: segmentIdParams, responses: { 200: segmentSchema }, errors: [404] }),
      onRequest,
    },
    async (req) => getSegment(db, projectOf(req).projectId, idOf(req.params)),
  );

  app.patch(
    '/segments/:id',
    {
      schema: doc({
        operationId: 'segments.update',
        summary: 'Update a segment',
        params: segmentIdParams,
        body: updateSegmentBody,
        responses: { 200: segmentSchema },
        errors: [400, 404, 503],
      }),
      onRequest,
    },
    async (req) => updateSegment(ctx, projectOf(req).projectId, idOf(req.params), parse(updateSegmentBody, req.body ?? {})),
  );

  app.delete(
    '/segments/:id',
    {
      schema: doc({
        operationId: 'segments.delete',
        summary: 'Delete a segment',
        description: `Deletes the segment with its members; a 409 with \`details.reasons\` while an active campaign or another segment uses it. A segment of more than ${SEGMENT_DELETE_BATCH.first} members stops tracking membership first (no entry or exit events), then its members are deleted in short batches before it: at most ${CASCADE_DELETES_PER_PROJECT} such delete of a project at once (of big segments and workflows; ${CASCADE_DELETES_PER_PROCESS} of all projects, per process), another is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s (members locked by other writes) stops the delete with a 409 whose \`details.deletedMembers\` counts the members deleted; the segment stays: ask again to finish.`,
        params: segmentIdParams,
        responses: { 204: null },
        errors: [404, 409, 429],
      }),
      onRequest,
    },
    async (req, reply) => {
      await deleteSegment(ctx, projectOf(req).projectId, idOf(req.params));
      return reply.status(204).send();
    },
  );

  app.get(
    '/segments/:id/contacts',
    {
      schema: doc({
        operationId: 'segments.contacts',
        summary: 'Contacts in a segment',
        params: segmentIdParams,
        query: segmentContactsQuery,
        responses: { 200: segmentContactsSchema },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => listSegmentContacts(ctx, projectOf(req).projectId, idOf(req.params), parse(segmentContactsQuery, req.query)),
  );

  app.post(
    '/segments/:id/members',
    {
      schema: doc({
        operationId: 'segments.addMembers',
        summary: 'Add emails to a STATIC segment',
        params: segmentIdParams,
        body: addMembersBody,
        responses: { 200: membersAddedSchema },
        errors: [400, 402, 404],
      }),
      onRequest,
    },
    async (req) => addMembers(ctx, projectOf(req).projectId, idOf(req.params), parse(addMembersBody, req.body)),
  );

  app.delete(
    '/segments/:id/members',
    {
      schema: doc({
        operationId: 'segments.removeMembers',
        summary: 'Remove emails from a STATIC segment',
        params: segmentIdParams,
        body: removeMembersBody,
        responses: { 200: membersRemovedSchema },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => removeMembers(ctx, projectOf(req).projectId, idOf(req.params), parse(removeMembersBody, req.body).emails),
  );

  app.post(
    '/segments/:id/compute',
    {
      schema: doc({
        operationId: 'segments.compute',
        summary: 'Recompute membership now',
        description:
          "Fires `segment.<slug>.entry` and `.exit` for the changes. Works through the contacts 10,000 at a time; one that takes longer than 25 s answers 503 `QUERY_TIMEOUT` with `details: { added, removed }`: those changes are kept, and the next compute (the 5-minute job, or another call) goes on after the last contact this one reached. A write that waits longer than 30 s (a busy database, a lock) answers the same 503; 400 means the condition alone took longer than 10 s to read. While the database's disk is below twice its floor (`DATABASE_MIN_FREE_MB`; `/health` says `filling`), computes wait: 507 `INSUFFICIENT_STORAGE`, with the same details.",
        params: segmentIdParams,
        responses: { 200: computedSchema },
        errors: [400, 404, 503],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = projectOf(req);
      // A heavy read when a request waits for it; the 5-minute job runs the same compute without a slot.
      return asHeavyRead(ctx.heavyReads, projectId, () => computeSegment(ctx, projectId, idOf(req.params)));
    },
  );

  app.post(
    '/segments/:id/refresh',
    {
      schema: doc({
        operationId: 'segments.refresh',
        summary: 'Recount members',
        params: segmentIdParams,
        responses: { 200: refreshedSchema },
        errors: [400, 404],
      }),
      onRequest,
    },
    async (req) => refreshSegment(ctx, projectOf(req).projectId, idOf(req.params)),
  );
}
