import cookie from '@fastify/cookie';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { AppContext } from './context.ts';
import { registerBodyTypes } from './http/body-types.ts';
import { frameworkErrors, registerErrorHandling } from './http/errors.ts';
import { trackRouteMethods } from './http/method-not-allowed.ts';
import { registerRequestLog } from './http/request-log.ts';
import { requestLogSerializer } from './http/log-redact.ts';
import { registerOpenApi } from './http/openapi.ts';
import { registerRateLimit } from './http/rate-limit.ts';
import { registerRoleGuard } from './http/roles.ts';
import { registerDiskFloor } from './http/disk-floor.ts';
import { requestIdFor } from './http/request-id.ts';
import { activityRoutes } from './modules/activity/routes.ts';
import { analyticsRoutes } from './modules/analytics/routes.ts';
import { authRoutes } from './modules/auth/routes.ts';
import { campaignRoutes } from './modules/campaigns/routes.ts';
import { billingRoutes, paymentRoutes } from './modules/billing/routes.ts';
import { bulkRoutes } from './modules/contacts/bulk/routes.ts';
import { importRoutes } from './modules/contacts/import/routes.ts';
import { memberRoutes } from './modules/members/routes.ts';
import { contactRoutes } from './modules/contacts/routes.ts';
import { docsRoutes } from './modules/docs/routes.ts';
import { domainRoutes } from './modules/domains/routes.ts';
import { emailRoutes } from './modules/emails/routes.ts';
import { eventRoutes } from './modules/events/routes.ts';
import { PAGE_HEADERS, RECIPIENT_PAGE_PATH, brokenLinkPage } from './modules/preferences/page.ts';
import { preferenceRoutes } from './modules/preferences/routes.ts';
import { projectLifecycleRoutes } from './modules/projects/lifecycle-routes.ts';
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
import { webRoutes } from './modules/web/routes.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';
import { workflowRoutes } from './modules/workflows/routes.ts';

/** The API's version, shown in /openapi.json. */
export const HERALD_VERSION = '0.1.0';

/** Default JSON body limit; routes that accept attachments or files raise it. */
export const BODY_LIMIT = 1024 * 1024;

/**
 * Fastify's router errors (http/errors.ts), except on a recipient page's path: a link a mail client
 * mangled so that the router refuses it gets the page a broken link gets (preferences/page.ts), not
 * the API's JSON.
 */
function routerErrors(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  if (!RECIPIENT_PAGE_PATH.test(req.url)) return frameworkErrors(err, req, reply);
  void reply.status(404).headers(PAGE_HEADERS).send(brokenLinkPage());
}

/** A Fastify instance with every plugin and every module's routes; the caller decides whether to listen. */
export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const trust = ctx.config.trustProxy;
  const app = Fastify({
    loggerInstance: ctx.log.child({}, { serializers: { req: requestLogSerializer } }) as FastifyBaseLogger,
    genReqId: requestIdFor,
    // One line per request instead of Fastify's two: src/http/request-log.ts
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    frameworkErrors: routerErrors,
    // Only from TRUST_PROXY (default off): X-Forwarded-For must not choose the logged or limited IP.
    trustProxy: typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : trust,
    // Signed link tokens (unsubscribe, tracking) travel as path parameters.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
  });
  app.decorateRequest('auth', null);
  app.decorateRequest('userId', null);
  app.decorateRequest('idempotencyKey', null);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  // First, so its onRoute hook sees every route: the document and the response check.
  registerOpenApi(app, { strictResponses: ctx.config.strictResponses, version: HERALD_VERSION });
  registerErrorHandling(app, trackRouteMethods(app));
  registerBodyTypes(app);
  registerRequestLog(app);
  await app.register(cookie);
  // Every multipart route takes one file part and at most three small fields; more is refused (413)
  // rather than buffered (the plugin's defaults allow 1,000 fields of 1 MB each).
  await app.register(multipart, {
    limits: { fileSize: 10 * 1024 * 1024, files: 1, parts: 4, fields: 3, fieldSize: 1024, fieldNameSize: 100, headerPairs: 20 },
  });
  await registerRateLimit(app, ctx.config);
  registerRoleGuard(app, ctx);
  registerDiskFloor(app, ctx);

  const modules = [
    systemRoutes,
    authRoutes,
    userRoutes,
    projectRoutes,
    memberRoutes,
    projectLifecycleRoutes,
    billingRoutes,
    paymentRoutes,
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
    analyticsRoutes,
    trackingRoutes,
    webhookRoutes,
    suppressionRoutes,
    reputationRoutes,
    segmentRoutes,
    workflowRoutes,
    docsRoutes,
    webRoutes,
  ];
  for (const routes of modules) routes(app, ctx);
  return app;
}
