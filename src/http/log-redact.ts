import type { FastifyRequest } from 'fastify';

/**
 * The request as the request log records it. Account links (`/auth/verify-email?token=…`, and
 * anything else under `/auth/`) carry bearer tokens in their query string: it is never logged.
 */
export function requestLogSerializer(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactUrl(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket ? req.socket.remotePort : undefined,
  };
}

export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1 || !url.startsWith('/auth/')) return url;
  return `${url.slice(0, q)}?[redacted]`;
}
