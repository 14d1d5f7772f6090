import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { describe } from '../../http/openapi.ts';
import { handleNotification } from './service.ts';
import { certificateSource } from './sns.ts';

/** Amazon SNS posts up to 256 KB messages. */
const BODY_LIMIT = 512 * 1024;

/**
 * Internal receiver for Amazon SES notifications delivered by SNS. No API key: the SNS signature
 * authenticates the message. SNS posts JSON with `Content-Type: text/plain`, which Fastify hands
 * over as a string.
 */
export function webhookRoutes(app: FastifyInstance, ctx: AppContext): void {
  const certs = certificateSource(ctx.config);
  app.post(
    '/webhooks/notifications',
    {
      schema: describe({
        operationId: 'webhooks.sesNotification',
        answeredWhenDiskFull: true,
        summary: 'Amazon SES notifications via SNS (bounces, complaints, deliveries)',
        description: 'Authenticated by the SNS message signature, not by a key. SNS posts JSON with Content-Type text/plain.',
        tag: 'Webhooks',
        access: 'none',
        responses: { 200: z.object({ status: z.enum(['processed', 'duplicate', 'ignored', 'confirmed']) }) },
        errors: [400, 403, 413, 415],
      }),
      bodyLimit: BODY_LIMIT,
      config: { accepts: ['text/plain'] },
    },
    async (req) => handleNotification(ctx, certs, req.body),
  );
}
