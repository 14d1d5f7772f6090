import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../../context.ts';
import { projectOf, requireProject } from '../../../http/auth.ts';
import { ApiError } from '../../../http/errors.ts';
import { readFilePart } from '../../../http/file-part.ts';
import { describer } from '../../../http/openapi.ts';
import { parse } from '../../../http/validate.ts';
import { JOB_STATUSES } from '../../../db/schema/jobs.ts';
import { IMPORT_REASONS, MAX_IMPORT_BYTES, importJobParams } from './schemas.ts';
import { JOB_SLOTS } from '../job-slots.ts';
import { createImport, getImportJob } from './service.ts';

const tooLarge = () => new ApiError(413, 'PAYLOAD_TOO_LARGE', 'The CSV file is larger than 5 MB', { details: { maxBytes: MAX_IMPORT_BYTES } });

/**
 * Keeps at most `limit` bytes; past that the rest of the file is drained unkept (so the client can
 * finish sending and read the answer) and the upload refused.
 */
function readLimited(stream: Readable, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else chunks.length = 0;
    });
    stream.on('end', () => (size > limit ? reject(tooLarge()) : resolve(Buffer.concat(chunks, size))));
    stream.on('error', reject);
  });
}

export function importRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Contacts', 'project');

  app.post(
    '/contacts/import',
    {
      schema: doc({
        operationId: 'contacts.import',
        summary: 'Import contacts from a CSV file (up to 5 MB; answers the job)',
        description: `Multipart part \`file\`: a CSV with an \`email\` column; other columns become custom data. 429 \`RATE_LIMIT_EXCEEDED\` (with Retry-After) while the project already has ${JOB_SLOTS.import.limit} imports queued or running.`,
        bodyType: 'multipart',
        body: z.object({ file: z.string().describe('The CSV file (binary)') }),
        responses: { 202: z.object({ jobId: z.string(), status: z.literal('queued') }) },
        errors: [400, 402, 413, 415],
      }),
      onRequest,
      config: { accepts: ['multipart/form-data'] },
    },
    async (req, reply) => {
      const { projectId } = projectOf(req);
      const { bytes, fileName } = await readFilePart(req, 'the CSV', async (part) => {
        const read = await readLimited(part.file, MAX_IMPORT_BYTES);
        // The multipart plugin's own (larger) limit may have cut the file short.
        if (part.file.truncated) throw tooLarge();
        return { bytes: read, fileName: part.filename || null };
      });
      const job = await createImport(ctx, projectId, { bytes, fileName });
      return reply.status(202).send(job);
    },
  );

  app.get(
    '/contacts/import/:jobId',
    {
      schema: doc({
        operationId: 'contacts.importJob',
        summary: 'An import job: progress, counts and row errors',
        params: importJobParams,
        responses: {
          200: z.object({
            jobId: z.string(),
            type: z.literal('import'),
            status: z.enum(JOB_STATUSES).describe('Poll until `completed` or `failed`'),
            fileName: z.string().nullable(),
            totalRows: z.number().int(),
            processedRows: z.number().int(),
            imported: z.number().int(),
            updated: z.number().int(),
            skipped: z.number().int(),
            errors: z.array(z.object({ row: z.number().int(), email: z.string(), reason: z.enum(IMPORT_REASONS) })),
            errorCount: z.number().int(),
            failureReason: z.string().optional(),
            createdAt: z.string(),
            completedAt: z.string().nullable(),
          }),
        },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => getImportJob(ctx.database.db, projectOf(req).projectId, parse(importJobParams, req.params).jobId),
  );
}
