import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { ApiError, validationError } from '../../http/errors.ts';
import { parse } from '../../http/validate.ts';
import { openImage, storeImage } from './service.ts';

const keyParams = z.object({ '*': z.string() });

const missingFile = () =>
  validationError([
    { field: 'file', message: 'Required: send the image as multipart part "file"', code: 'invalid_type', received: 'undefined' },
  ]);

export function uploadRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post('/uploads/image', { onRequest: requireProject(ctx) }, async (req, reply) => {
    const { projectId } = projectOf(req);
    const part = await req.file();
    if (!part) throw missingFile();
    if (part.fieldname !== 'file') {
      part.file.resume();
      throw missingFile();
    }
    // toBuffer throws FST_REQ_FILE_TOO_LARGE when the 10 MB multipart limit cut the file short, but not
    // when the cut falls in the last chunk: `truncated` catches that case.
    const bytes = await part.toBuffer();
    if (part.file.truncated) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Uploaded file is too large');
    const upload = await storeImage(ctx, projectId, bytes);
    return reply.status(201).send(upload);
  });

  // Public, so images work in any mail client; keys are unguessable and never change content.
  app.get('/uploads/*', async (req, reply) => {
    const { '*': key } = parse(keyParams, req.params);
    const image = await openImage(ctx, key);
    return reply
      .header('content-type', image.contentType)
      .header('content-length', String(image.size))
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .header('content-security-policy', "default-src 'none'; sandbox")
      .send(image.bytes);
  });
}
