import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { requireApiKey } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { createDnsChecker } from './dns.ts';
import { verifyBody } from './schemas.ts';
import { verifyEmail } from './service.ts';

export function verifyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const dns = createDnsChecker({ servers: ctx.dns.getServers(), clock: ctx.clock });
  app.addHook('onClose', async () => dns.close());

  app.post('/v1/verify', { onRequest: requireApiKey(ctx, 'secret') }, async (req) => {
    const { email } = parse(verifyBody, req.body);
    return { success: true, data: await verifyEmail(dns, email) };
  });
}
