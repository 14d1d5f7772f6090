import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { ApiError } from '../../http/errors.ts';
import { filePart } from '../../http/file-part.ts';
import { describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { openImage, storeImage } from './service.ts';

const keyParams = z.object({ '*': z.string() });

export function uploadRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post(
    '/uploads/image',
    {
      schema: describe({
        operationId: 'uploads.image',
        summary: 'Upload an image for email bodies (JPEG, PNG, GIF or WebP, up to 10 MB)',
        tag: 'Uploads',
        access: 'project',
        bodyType: 'multipart',
        body: z.object({ file: z.string().describe('The image (binary)') }),
        responses: { 201: z.object({ url: z.string(), key: z.string(), contentType: z.string(), size: z.number().int() }) },
        errors: [400, 413, 415],
      }),
      onRequest: requireProject(ctx),
      config: { accepts: ['multipart/form-data'] },
    },
    async (req, reply) => {
      const { projectId } = projectOf(req);
      const part = await filePart(req, 'the image');
      // toBuffer throws FST_REQ_FILE_TOO_LARGE when the 10 MB multipart limit cut the file short, but not
      // when the cut falls in the last chunk: `truncated` catches that case.
      const bytes = await part.toBuffer();
      if (part.file.truncated) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Uploaded file is too large');
      const upload = await storeImage(ctx, projectId, bytes);
      return reply.status(201).send(upload);
    },
  );

  // Public, so images work in any mail client; keys are unguessable and never change content.
  app.get(
    '/uploads/*',
    {
      schema: describe({
        operationId: 'uploads.get',
        summary: 'An uploaded image (public, immutable)',
        tag: 'Uploads',
        access: 'none',
        responses: { 200: { schema: null, contentType: 'image/*', description: 'The image bytes' } },
        errors: [404],
      }),
    },
    async (req, reply) => {
      const { '*': key } = parse(keyParams, req.params);
      const image = await openImage(ctx, key);
      return reply
        .header('content-type', image.contentType)
        .header('content-length', String(image.size))
        .header('cache-control', 'public, max-age=31536000, immutable')
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .send(image.body);
    },
  );
}
