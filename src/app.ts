import cookie from '@fastify/cookie';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AppContext } from './context.ts';
import { frameworkErrors, registerErrorHandling } from './http/errors.ts';
import { registerRateLimit } from './http/rate-limit.ts';
import { requestIdFor } from './http/request-id.ts';
import { activityRoutes } from './modules/activity/routes.ts';
import { authRoutes } from './modules/auth/routes.ts';
import { campaignRoutes } from './modules/campaigns/routes.ts';
import { bulkRoutes } from './modules/contacts/bulk/routes.ts';
import { importRoutes } from './modules/contacts/import/routes.ts';
import { contactRoutes } from './modules/contacts/routes.ts';
import { domainRoutes } from './modules/domains/routes.ts';
import { emailRoutes } from './modules/emails/routes.ts';
import { eventRoutes } from './modules/events/routes.ts';
import { preferenceRoutes } from './modules/preferences/routes.ts';
import { projectRoutes } from './modules/projects/routes.ts';
import { reputationRoutes } from './modules/reputation/routes.ts';
import { segmentRoutes } from './modules/segments/routes.ts';
import { suppressionRoutes } from './modules/suppressions/routes.ts';
import { systemRoutes } from './modules/system/routes.ts';
import { templateRoutes } from './modules/templates/routes.ts';
import { trackingRoutes } from './modules/tracking/routes.ts';
import { uploadRoutes } from './modules/uploads/routes.ts';
import { userRoutes } from './modules/users/routes.ts';
import { verifyRoutes } from './modules/verify/routes.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';

/** Default JSON body limit; routes that accept attachments or files raise it. */
export const BODY_LIMIT = 1024 * 1024;

/** A Fastify instance with every plugin and every module's routes; the caller decides whether to listen. */
export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    genReqId: requestIdFor,
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    frameworkErrors,
    trustProxy: true,
    // Signed link tokens (unsubscribe, tracking) travel as path parameters.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
  });
  app.decorateRequest('auth', null);
  app.decorateRequest('userId', null);
  app.decorateRequest('idempotencyKey', null);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  registerErrorHandling(app);
  await app.register(cookie);
  await app.register(multipart, { limits: { fileSize: 10 * 1024 * 1024, files: 1 } });
  await registerRateLimit(app, ctx.config);

  const modules = [
    systemRoutes,
    authRoutes,
    userRoutes,
    projectRoutes,
    contactRoutes,
    importRoutes,
    bulkRoutes,
    domainRoutes,
    templateRoutes,
    campaignRoutes,
    emailRoutes,
    preferenceRoutes,
    verifyRoutes,
    uploadRoutes,
    eventRoutes,
    activityRoutes,
    trackingRoutes,
    webhookRoutes,
    suppressionRoutes,
    reputationRoutes,
    segmentRoutes,
  ];
  for (const routes of modules) routes(app, ctx);
  return app;
}
