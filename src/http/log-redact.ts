import type { FastifyRequest } from 'fastify';
import { loggableUrl } from './request-log.ts';

/**
 * The request as a log line that names it records it (Fastify logs one with a 5xx): its URL as the
 * request log writes it (loggableUrl), and no query string at all under `/auth/`, whose account
 * links carry bearer tokens.
 */
export function requestLogSerializer(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactUrl(loggableUrl(req)),
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
