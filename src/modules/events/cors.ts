import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * CORS for /v1/track, the one endpoint browsers call (with the public key): any origin, never
 * credentials (no cookies), the headers a tracking snippet sends. Set in onRequest, so error
 * responses (401, 422, 429) are readable by the page too.
 */
const ALLOW_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Request-ID';
const EXPOSE_HEADERS = 'X-Request-ID, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After';

export async function trackCors(_req: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header('access-control-allow-origin', '*');
  reply.header('access-control-expose-headers', EXPOSE_HEADERS);
}

/** The OPTIONS preflight: 204, cacheable for a day. */
export async function trackPreflight(_req: FastifyRequest, reply: FastifyReply): Promise<void> {
  await reply
    .status(204)
    .header('access-control-allow-origin', '*')
    .header('access-control-allow-methods', 'POST, OPTIONS')
    .header('access-control-allow-headers', ALLOW_HEADERS)
    .header('access-control-max-age', '86400')
    .send();
}
