import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireApiKey, requireProject } from '../../http/auth.ts';
import { heavyReadNote } from '../../http/heavy-reads.ts';
import { idempotency } from '../../http/idempotency.ts';
import { limitParam } from '../../http/pagination.ts';
import { cursorList, describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { EMAIL_STATUSES, emailIdParams, emailRecordSchema, parseSendBody, sendBody, sendResultSchema } from './schemas.ts';
import { type PreparedSend, type SendResult, prepareSend, sendContactKeys, sendGroupSize, sendMany, sendPrepared } from './send.ts';
import { WRITE_GROUP_LIMITS, logGroupFailure, writeGroups } from '../../db/write-groups.ts';
import { EMAILS_LISTED_AT_ONCE, EMAILS_READ_STATEMENT_MS, getEmail, getRawEmail, listEmails } from './service.ts';
import { RAW_DOWNLOADS_PER_PROCESS, RAW_DOWNLOADS_PER_PROJECT } from './raw-source.ts';

/** Attachments up to 40 MB per message arrive base64-encoded inside the JSON body. */
const SEND_BODY_LIMIT = 56 * 1024 * 1024;

const listQuery = z.object({
  limit: limitParam,
  cursor: z.string().max(500).optional(),
  contactId: z.string().max(100).optional(),
  campaignId: z.string().max(100).optional(),
  status: z.enum(EMAIL_STATUSES).optional(),
});

export function emailRoutes(app: FastifyInstance, ctx: AppContext): void {
  const idem = idempotency(ctx);

  // Concurrent sends of one project commit together (db/write-groups.ts).
  const sends = writeGroups<PreparedSend, SendResult>({
    ...WRITE_GROUP_LIMITS,
    sizeOf: sendGroupSize,
    conflictKeys: sendContactKeys,
    runOne: (send) => sendPrepared(ctx, send),
    runMany: (group) => sendMany(ctx, group[0].projectId, group),
    onGroupFailed: (err, size) => logGroupFailure(ctx, 'send', err, size),
  });

  app.post(
    '/v1/send',
    {
      bodyLimit: SEND_BODY_LIMIT,
      onRequest: requireApiKey(ctx, 'secret'),
      preHandler: idem.preHandler,
      onSend: idem.onSend,
      schema: describe({
        operationId: 'emails.send',
        summary: 'Send a transactional email',
        description:
          'One message per recipient (`to` takes up to 50). A recipient without a contact gets one (unsubscribed unless `subscribed: true`). Give `subject` and `body`, or a `template` id; `data` personalises and is stored on the contact. Attachments up to 10 MB in total, base64.',
        tag: 'Emails',
        access: 'secretKey',
        idempotent: true,
        body: sendBody,
        bodyExample: { to: 'ada@example.com', subject: 'Welcome, {{name}}', body: '<p>Hello {{name}}</p>', from: 'hello@acme.test', data: { name: 'Ada' } },
        responses: {
          200: {
            schema: sendResultSchema,
            example: {
              success: true,
              data: {
                emails: [
                  {
                    contact: { id: 'cnt_01j9z3k5e8f7g6h5j4k3m2n1p0', email: 'ada@example.com' },
                    email: '0b5e7c1a-2f4d-4c8e-9a6b-3d2e1f0a9b8c',
                    status: 'QUEUED',
                  },
                ],
                timestamp: '2026-01-01T12:00:00.000Z',
              },
            },
          },
        },
        errors: [400, 403, 404, 409, 413, 415],
      }),
    },
    async (req) => {
      const prepared = await prepareSend(ctx, projectOf(req).projectId, parseSendBody(req.body));
      return { success: true, data: await sends.submit(prepared.projectId, prepared) };
    },
  );

  const onRequest = requireProject(ctx);

  app.get(
    '/emails',
    {
      onRequest,
      schema: describe({
        operationId: 'emails.list',
        summary: 'List sent emails, newest first',
        description: `Cursor-paginated, newest first; \`contactId\`, \`campaignId\` and \`status\` filter. ${heavyReadNote(
          `When the list reads more than ${EMAILS_LISTED_AT_ONCE.toLocaleString('en-US')} emails (a contact or campaign with more, or a status so rare that its page walks more)`,
          EMAILS_READ_STATEMENT_MS,
        )}`,
        tag: 'Emails',
        access: 'project',
        query: listQuery,
        responses: { 200: cursorList(emailRecordSchema) },
        errors: [400, 503],
      }),
    },
    async (req) => listEmails(ctx, projectOf(req).projectId, parse(listQuery, req.query)),
  );

  app.get(
    '/emails/:id',
    {
      onRequest,
      schema: describe({
        operationId: 'emails.get',
        summary: 'Get one email and its delivery status',
        tag: 'Emails',
        access: 'project',
        params: emailIdParams,
        responses: { 200: emailRecordSchema },
        errors: [404],
      }),
    },
    async (req) => getEmail(ctx, projectOf(req).projectId, parse(emailIdParams, req.params).id),
  );

  app.get(
    '/emails/:id/raw',
    {
      onRequest,
      schema: describe({
        operationId: 'emails.raw',
        summary: 'Download the message as sent (RFC 5322)',
        description: `Captured mail only (no SMTP_URL). 404 EMAIL_NOT_FOUND when nothing was captured (not sent yet, or relayed through SMTP); 410 EMAIL_SOURCE_EXPIRED once EMAIL_CONTENT_RETENTION_DAYS cleared it. At most ${RAW_DOWNLOADS_PER_PROJECT} downloads of a project at once (${RAW_DOWNLOADS_PER_PROCESS} of all projects, per process); another is a 429 at once, with \`details.retryAfter\` and Retry-After.`,
        tag: 'Emails',
        access: 'project',
        params: emailIdParams,
        responses: { 200: { schema: null, contentType: 'message/rfc822', description: 'The raw message' } },
        errors: [404, 410, 429],
      }),
    },
    async (req, reply) => {
      const raw = await getRawEmail(ctx, projectOf(req).projectId, parse(emailIdParams, req.params).id);
      void reply.type('message/rfc822').header('content-length', String(raw.size));
      // Frees the download's slot however the response ends, even if it closed before the stream was piped.
      reply.raw.once('close', () => raw.stream.destroy());
      if (req.method !== 'HEAD') return reply.send(raw.stream);
      // Fastify answers HEAD by draining the body: the size is all it needs.
      raw.stream.destroy();
      return reply.send(Readable.from([]));
    },
  );
}
