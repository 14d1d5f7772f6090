import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
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
  app.post('/webhooks/notifications', { bodyLimit: BODY_LIMIT }, async (req) => handleNotification(ctx, certs, req.body));
}
