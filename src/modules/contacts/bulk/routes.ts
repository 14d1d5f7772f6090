import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../../context.ts';
import { projectOf, requireProject } from '../../../http/auth.ts';
import { describer } from '../../../http/openapi.ts';
import { parse } from '../../../http/validate.ts';
import { BULK_ERROR_REASONS, JOB_STATUSES } from '../../../db/schema/jobs.ts';
import { BULK_TYPES, bulkBody, bulkJobParams } from './schemas.ts';
import { createBulkJob, getBulkJob } from './service.ts';
import { JOB_SLOTS } from '../job-slots.ts';

const BULK_OPERATIONS = {
  'bulk-subscribe': 'contacts.bulkSubscribe',
  'bulk-unsubscribe': 'contacts.bulkUnsubscribe',
  'bulk-delete': 'contacts.bulkDelete',
} as const;

const queuedSchema = z.object({ jobId: z.string(), status: z.literal('queued') });

const bulkJobSchema = z
  .object({
    jobId: z.string(),
    type: z.enum(BULK_TYPES),
    status: z.enum(JOB_STATUSES).describe('Poll until `completed` or `failed`'),
    total: z.number().int(),
    processed: z.number().int(),
    succeeded: z.number().int(),
    unchanged: z.number().int(),
    failed: z.number().int(),
    errors: z.array(z.object({ id: z.string(), reason: z.enum(BULK_ERROR_REASONS) })),
    failureReason: z.string().optional(),
    createdAt: z.string(),
    completedAt: z.string().nullable(),
  })
  .passthrough();

export function bulkRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Contacts', 'project');

  for (const type of BULK_TYPES) {
    const schema = doc({
      operationId: BULK_OPERATIONS[type],
      summary: `Queue a ${type.replace('bulk-', '')} of up to 1,000 contacts (answers the job)`,
      description: `429 \`RATE_LIMIT_EXCEEDED\` (with Retry-After) while the project already has ${JOB_SLOTS.bulk.limit} bulk jobs queued or running.`,
      body: bulkBody,
      responses: { 202: queuedSchema },
      errors: [400],
      // Deleting frees space, and an unsubscribe must never wait; subscribing again writes events.
      ...(type === 'bulk-subscribe' ? {} : { answeredWhenDiskFull: true as const }),
    });
    app.post(`/contacts/${type}`, { onRequest, schema }, async (req, reply) => {
      const { contactIds } = parse(bulkBody, req.body);
      return reply.status(202).send(await createBulkJob(ctx, projectOf(req).projectId, type, contactIds));
    });
  }

  app.get(
    '/contacts/bulk/:jobId',
    {
      schema: doc({
        operationId: 'contacts.bulkJob',
        summary: 'A bulk job and its progress',
        params: bulkJobParams,
        responses: { 200: bulkJobSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => getBulkJob(ctx.database.db, projectOf(req).projectId, parse(bulkJobParams, req.params).jobId),
  );
}
