import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { requireApiKey } from '../../http/auth.ts';
import { describe, envelope } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { createDnsChecker } from './dns.ts';
import { verifyBody } from './schemas.ts';
import { verifyEmail } from './service.ts';

const verifyResultSchema = envelope(
  z.object({
    email: z.string(),
    valid: z.boolean(),
    isDisposable: z.boolean(),
    isAlias: z.boolean(),
    isTypo: z.boolean(),
    isPlusAddressed: z.boolean(),
    isPersonalEmail: z.boolean(),
    domainExists: z.boolean(),
    hasWebsite: z.boolean(),
    hasMxRecords: z.boolean(),
    reasons: z.array(z.string()),
    suggestedEmail: z.string().optional(),
  }),
);

export function verifyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const dns = createDnsChecker({ servers: ctx.dns.getServers(), clock: ctx.clock });
  app.addHook('onClose', async () => dns.close());

  app.post(
    '/v1/verify',
    {
      schema: describe({
        operationId: 'emails.verify',
        answeredWhenDiskFull: true,
        summary: 'Check an email address (syntax, domain, MX, disposable, typo)',
        tag: 'Verify',
        access: 'secretKey',
        body: verifyBody,
        bodyExample: { email: 'ada@example.com' },
        responses: { 200: verifyResultSchema },
      }),
      onRequest: requireApiKey(ctx, 'secret'),
    },
    async (req) => {
      const { email } = parse(verifyBody, req.body);
      return { success: true, data: await verifyEmail(dns, email) };
    },
  );
}
