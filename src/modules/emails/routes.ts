import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireApiKey, requireProject } from '../../http/auth.ts';
import { idempotency } from '../../http/idempotency.ts';
import { limitParam } from '../../http/pagination.ts';
import { parse } from '../../http/validate.ts';
import { emailIdParams, sendBody } from './schemas.ts';
import { sendEmails } from './send.ts';
import { getEmail, getRawEmail, listEmails } from './service.ts';

/** Attachments up to 40 MB per message arrive base64-encoded inside the JSON body. */
const SEND_BODY_LIMIT = 56 * 1024 * 1024;

const listQuery = z.object({
  limit: limitParam,
  cursor: z.string().max(500).optional(),
  contactId: z.string().max(100).optional(),
  campaignId: z.string().max(100).optional(),
  status: z.enum(['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED']).optional(),
});

export function emailRoutes(app: FastifyInstance, ctx: AppContext): void {
  const idem = idempotency(ctx);

  app.post(
    '/v1/send',
    { bodyLimit: SEND_BODY_LIMIT, onRequest: requireApiKey(ctx, 'secret'), preHandler: idem.preHandler, onSend: idem.onSend },
    async (req) => ({ success: true, data: await sendEmails(ctx, projectOf(req).projectId, parse(sendBody, req.body)) }),
  );

  const onRequest = requireProject(ctx);

  app.get('/emails', { onRequest }, async (req) => listEmails(ctx, projectOf(req).projectId, parse(listQuery, req.query)));

  app.get('/emails/:id', { onRequest }, async (req) => getEmail(ctx, projectOf(req).projectId, parse(emailIdParams, req.params).id));

  app.get('/emails/:id/raw', { onRequest }, async (req, reply) => {
    const raw = await getRawEmail(ctx, projectOf(req).projectId, parse(emailIdParams, req.params).id);
    return reply.type('message/rfc822').send(raw);
  });
}
