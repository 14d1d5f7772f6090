import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { ApiError, notFound } from '../../http/errors.ts';
import { readFilePart } from '../../http/file-part.ts';
import { cursorList, describe } from '../../http/openapi.ts';
import { limitParam } from '../../http/pagination.ts';
import { parse } from '../../http/validate.ts';
import { deleteUpload, listUploads, openImage, storeImage } from './service.ts';

const keyParams = z.object({ '*': z.string() });

const listQuery = z.object({ limit: limitParam, cursor: z.string().max(1000).optional() });

const uploadSchema = z.object({ url: z.string(), key: z.string(), contentType: z.string(), size: z.number().int() });

const uploadItemSchema = z.object({ key: z.string(), url: z.string(), contentType: z.string(), size: z.number().int(), createdAt: z.string() });

const usageSchema = z
  .object({
    bytes: z.number().int(),
    files: z.number().int(),
    quotaBytes: z.number().int().describe('UPLOAD_QUOTA_MB in bytes'),
    maxFiles: z.number().int(),
  })
  .describe("What the project's uploads use of its quota");

const uploadListSchema = cursorList(uploadItemSchema).extend({ usage: usageSchema });

/**
 * The router ignores trailing slashes, so `/uploads/` would reach the list rather than the public
 * GET /uploads/*; it stays what it always was, an image that is not found.
 */
const keepTrailingSlashAnImage = async (req: FastifyRequest) => {
  if (req.url.split('?')[0].endsWith('/')) throw notFound('upload', '');
};

export function uploadRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post(
    '/uploads/image',
    {
      schema: describe({
        operationId: 'uploads.image',
        summary: 'Upload an image for email bodies (JPEG, PNG, GIF or WebP, up to 10 MB)',
        description:
          "Counts against the project's quota (UPLOAD_QUOTA_MB in all, at most 10,000 images): past it, 403 with `details.limit`. " +
          "507 INSUFFICIENT_STORAGE when the server's disk is nearly full.",
        tag: 'Uploads',
        access: 'project',
        bodyType: 'multipart',
        body: z.object({ file: z.string().describe('The image (binary)') }),
        responses: { 201: uploadSchema },
        errors: [400, 413, 415, 507],
      }),
      onRequest: requireProject(ctx),
      config: { accepts: ['multipart/form-data'] },
    },
    async (req, reply) => {
      const { projectId } = projectOf(req);
      const bytes = await readFilePart(req, 'the image', async (part) => {
        // toBuffer throws FST_REQ_FILE_TOO_LARGE when the 10 MB multipart limit cut the file short, but not
        // when the cut falls in the last chunk: `truncated` catches that case.
        const read = await part.toBuffer();
        if (part.file.truncated) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Uploaded file is too large');
        return read;
      });
      const upload = await storeImage(ctx, projectId, bytes);
      return reply.status(201).send(upload);
    },
  );

  app.get(
    '/uploads',
    {
      schema: describe({
        operationId: 'uploads.list',
        summary: "The project's uploaded images, newest first, with its quota usage",
        tag: 'Uploads',
        access: 'project',
        query: listQuery,
        responses: { 200: uploadListSchema },
        errors: [400],
      }),
      onRequest: [keepTrailingSlashAnImage, requireProject(ctx)],
    },
    async (req) => listUploads(ctx, projectOf(req).projectId, parse(listQuery, req.query)),
  );

  app.delete(
    '/uploads/*',
    {
      schema: describe({
        operationId: 'uploads.delete',
        summary: 'Delete an uploaded image (its public URL stops working)',
        tag: 'Uploads',
        access: 'project',
        responses: { 204: null },
        errors: [404],
      }),
      onRequest: requireProject(ctx),
    },
    async (req, reply) => {
      const { '*': key } = parse(keyParams, req.params);
      await deleteUpload(ctx, projectOf(req).projectId, key);
      return reply.status(204).send();
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
