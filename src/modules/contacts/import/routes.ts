import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../../context.ts';
import { projectOf, requireProject } from '../../../http/auth.ts';
import { ApiError, validationError } from '../../../http/errors.ts';
import { parse } from '../../../http/validate.ts';
import { MAX_IMPORT_BYTES, importJobParams } from './schemas.ts';
import { createImport, getImportJob } from './service.ts';

const missingFile = () =>
  validationError([
    { field: 'file', message: 'Required: send the CSV as multipart part "file"', code: 'invalid_type', received: 'undefined' },
  ]);

const tooLarge = () =>
  new ApiError(413, 'PAYLOAD_TOO_LARGE', 'The CSV file is larger than 5 MB', { details: { maxBytes: MAX_IMPORT_BYTES } });

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

  app.post('/contacts/import', { onRequest }, async (req, reply) => {
    const { projectId } = projectOf(req);
    const part = await req.file();
    if (!part) throw missingFile();
    if (part.fieldname !== 'file') {
      part.file.resume();
      throw missingFile();
    }
    const bytes = await readLimited(part.file, MAX_IMPORT_BYTES);
    // The multipart plugin's own (larger) limit may have cut the file short.
    if (part.file.truncated) throw tooLarge();
    const job = await createImport(ctx, projectId, { bytes, fileName: part.filename || null });
    return reply.status(202).send(job);
  });

  app.get('/contacts/import/:jobId', { onRequest }, async (req) =>
    getImportJob(ctx.database.db, projectOf(req).projectId, parse(importJobParams, req.params).jobId),
  );
}
