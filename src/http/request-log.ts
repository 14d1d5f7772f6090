import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * Query values never logged: credentials, free text (a search is often a name or an address), and
 * cursors (base64 of the last row's sort key, an address when a list is sorted by email).
 */
const SECRET_QUERY = /token|key|secret|password|signature|sig$|auth|jwt|session|code|state/i;
const FREE_TEXT_QUERY = /^(search|q|query|cursor)$/i;
/** A path segment that looks like an email address (x@y.z, the @ maybe percent-encoded); `@me` is not one. */
const EMAIL_LIKE = /^.+(@|%40).+\..+$/i;

/**
 * The request's URL for a log line, with no credential and no email address in it: signed link
 * tokens in the path become the route's pattern (`/unsubscribe/:token`, `/t/c/*`), an address in
 * the path or a query value becomes `***`, and a path no route matched keeps only its first
 * segment (whatever follows may be a mistyped link's token).
 */
export function loggableUrl(req: FastifyRequest): string {
  const [rawPath, query] = req.url.split('?', 2);
  const path = loggablePath(rawPath, req.routeOptions.url);
  if (!query) return path;
  const params = new URLSearchParams(query);
  for (const [key, value] of [...params]) {
    if (SECRET_QUERY.test(key) || FREE_TEXT_QUERY.test(key) || value.includes('@')) params.set(key, '***');
  }
  return `${path}?${params.toString()}`;
}

function loggablePath(path: string, pattern: string | undefined): string {
  if (!pattern) {
    const second = path.indexOf('/', 1);
    return second === -1 ? path : `${path.slice(0, second)}/…`;
  }
  if (pattern.includes('*') || /:\w*token/i.test(pattern)) return pattern;
  return path
    .split('/')
    .map((segment) => (EMAIL_LIKE.test(segment) ? '***' : segment))
    .join('/');
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
