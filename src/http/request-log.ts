import type { FastifyInstance, FastifyRequest } from 'fastify';

const SECRET_QUERY = /token|key|secret|password|signature|sig$/i;

/** The request's URL for a log line: signed link tokens in the path and secret-looking query values are replaced. */
export function loggableUrl(req: FastifyRequest): string {
  const [rawPath, query] = req.url.split('?', 2);
  let path = rawPath;
  const pattern = req.routeOptions.url;
  if (pattern && /:\w*token/i.test(pattern)) path = pattern;
  if (!query) return path;
  const params = new URLSearchParams(query);
  for (const key of [...params.keys()]) if (SECRET_QUERY.test(key)) params.set(key, '***');
  return `${path}?${params.toString()}`;
}

/** One line per request, written when the response is sent (Fastify's own two lines are off). */
export function registerRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', async (req, reply) => {
    const ms = Math.round(reply.elapsedTime);
    const url = loggableUrl(req);
    const level = reply.statusCode >= 500 ? 'error' : 'info';
    req.log[level]({ method: req.method, url, statusCode: reply.statusCode, ms }, `${req.method} ${url} ${reply.statusCode} ${ms}ms`);
  });
}
