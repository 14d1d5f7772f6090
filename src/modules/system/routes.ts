import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';

export function systemRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/health', async (_req, reply) => {
    try {
      await ctx.database.pool.query('SELECT 1');
      return { status: 'ok' };
    } catch {
      return reply.status(503).send({ status: 'unavailable' });
    }
  });

  app.get('/config', async () => ({
    signupEnabled: !ctx.config.disableSignup,
    smtpConfigured: Boolean(ctx.config.smtpUrl),
    billingEnabled: Boolean(ctx.config.stripeSecretKey),
    oauth: { github: false, google: false },
    publicUrl: ctx.config.publicUrl,
  }));
}
