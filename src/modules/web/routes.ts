import fastifyStatic from '@fastify/static';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.ts';
import { type RouteDoc, describe } from '../../http/openapi.ts';
import { WEB_DIST } from './build-state.ts';

/** The dashboard lives under one prefix, so its page URLs never collide with an API route. */
export const DASHBOARD_BASE = '/app';

/**
 * Scripts only from our own origin (no inline script, no eval). Styles allow inline because the
 * component library sets CSS variables through style attributes. Images may come from anywhere
 * over https: template previews show the email's own images.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: https:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const HASHED_ASSET = /^\/app\/assets\//;

function securityHeaders(reply: FastifyReply): void {
  reply.header('content-security-policy', DASHBOARD_CSP);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('x-frame-options', 'DENY');
  reply.header('referrer-policy', 'same-origin');
}

/**
 * Serves the built dashboard (web/dist): hashed assets with a year-long immutable cache, every other
 * path under /app/ answered with index.html (the SPA's router takes over). `GET /` redirects to it.
 * API routes are untouched, and unknown API paths keep their JSON 404.
 */
const html = (description: string) => ({ schema: null, contentType: 'text/html', description });
const doc = (operationId: string, summary: string, responses: RouteDoc['responses']) =>
  describe({ operationId, summary, tag: 'Dashboard', access: 'none', responses });

/** `GET /` without a built dashboard: where the API reference is, and how to build the dashboard. */
const NO_DASHBOARD_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Herald</title></head>
<body>
<h1>Herald</h1>
<p>The API is running. Its reference is at <a href="/docs">/docs</a> (the OpenAPI document: <a href="/openapi.json">/openapi.json</a>).</p>
<p>The dashboard is not built: run <code>npm run build:web</code> (<code>npm start</code> builds it when missing).</p>
</body></html>
`;

export function webRoutes(app: FastifyInstance, _ctx: AppContext): void {
  if (!existsSync(path.join(WEB_DIST, 'index.html'))) {
    app.get(
      '/',
      { schema: doc('dashboard.home', 'Links to the API reference (no dashboard built)', { 200: html('A page linking /docs') }) },
      async (_req, reply) => {
        securityHeaders(reply);
        return reply.type('text/html; charset=utf-8').send(NO_DASHBOARD_PAGE);
      },
    );
    const notBuilt = async (_req: FastifyRequest, reply: FastifyReply) =>
      reply
        .status(503)
        .type('text/plain; charset=utf-8')
        .send('The dashboard is not built. Run `npm run build:web` (npm start builds it when missing). The API reference is at /docs.\n');
    const notBuiltDoc = { 503: { schema: null, contentType: 'text/plain', description: 'The dashboard is not built' } };
    app.get(DASHBOARD_BASE, { schema: doc('dashboard.app', 'The dashboard (not built)', notBuiltDoc) }, notBuilt);
    app.get(`${DASHBOARD_BASE}/*`, { schema: doc('dashboard.page', 'A dashboard page (not built)', notBuiltDoc) }, notBuilt);
    return;
  }

  app.get('/', { schema: doc('dashboard.home', 'Redirects to the dashboard', { 302: { schema: null, description: 'To /app/' } }) }, async (_req, reply) =>
    reply.redirect(`${DASHBOARD_BASE}/`),
  );

  void app.register(fastifyStatic, {
    root: WEB_DIST,
    prefix: `${DASHBOARD_BASE}/`,
    // One route per built file; the catch-all below answers everything else with index.html.
    wildcard: false,
    index: false,
    cacheControl: false,
    setHeaders(reply, filePath) {
      securityHeaders(reply);
      const immutable = filePath.startsWith(path.join(WEB_DIST, 'assets') + path.sep);
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });

  const page = async (req: FastifyRequest, reply: FastifyReply) => {
    // A missing hashed asset is a 404, never the HTML page (a stale tab must not parse HTML as JS).
    if (HASHED_ASSET.test(req.url)) return reply.callNotFound();
    return reply.sendFile('index.html');
  };
  app.get(DASHBOARD_BASE, { schema: doc('dashboard.app', 'The dashboard (single-page app)', { 200: html('The app shell') }) }, page);
  app.get(`${DASHBOARD_BASE}/*`, { schema: doc('dashboard.page', 'A dashboard page (the app shell)', { 200: html('The app shell') }) }, page);
}
