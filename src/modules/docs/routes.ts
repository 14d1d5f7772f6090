import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';

/**
 * GET /docs: the API reference, Swagger UI (the `swagger-ui-dist` package) rendering /openapi.json.
 * Every file comes from our own origin and the page runs under a strict CSP: no inline script, no
 * other origin, so it works offline and behind a firewall.
 */

export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Swagger UI sets element styles at run time.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const fileParams = z.object({ file: z.string().max(100) });

const SWAGGER_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The files the page loads, read once at start-up (about 1.5 MB). */
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
  'swagger-ui-standalone-preset.js': { file: 'swagger-ui-standalone-preset.js', type: 'text/javascript; charset=utf-8' },
  'favicon-32x32.png': { file: 'favicon-32x32.png', type: 'image/png' },
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Herald API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<noscript>The reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;

// No inline script under the CSP: the start-up code is a file of its own.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  plugins: [SwaggerUIBundle.plugins.DownloadUrl],
  layout: 'StandaloneLayout',
  validatorUrl: null,
  tryItOutEnabled: false,
  persistAuthorization: false,
});
`;

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', DOCS_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'same-origin');
}

export function docsRoutes(app: FastifyInstance, _ctx: AppContext): void {
  const files = new Map<string, { body: Buffer | string; type: string }>();
  for (const [name, a] of Object.entries(ASSETS)) files.set(name, { body: readFileSync(path.join(SWAGGER_DIR, a.file)), type: a.type });
  files.set('init.js', { body: INIT, type: 'text/javascript; charset=utf-8' });

  const html = { schema: null, contentType: 'text/html', description: 'An HTML page' } as const;

  app.get(
    '/docs',
    { schema: describe({ operationId: 'meta.docs', summary: 'This API reference (HTML)', tag: 'Meta', access: 'none', responses: { 200: html } }) },
    async (_req, reply) => securityHeaders(reply).header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(PAGE),
  );

  app.get(
    '/docs/assets/:file',
    {
      schema: describe({
        operationId: 'meta.docsAsset',
        summary: "The reference page's scripts and styles",
        tag: 'Meta',
        access: 'none',
        params: fileParams,
        responses: { 200: { schema: null, contentType: 'text/javascript', description: 'A script, style sheet or icon' } },
        errors: [404],
      }),
    },
    async (req, reply) => {
      const { file } = parse(fileParams, req.params);
      const asset = files.get(file);
      if (!asset) return reply.callNotFound();
      return securityHeaders(reply).header('cache-control', 'public, max-age=3600').type(asset.type).send(asset.body);
    },
  );
}
