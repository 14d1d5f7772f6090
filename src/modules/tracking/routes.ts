import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { notFound } from '../../http/errors.ts';
import { isTrackableUrl, verifyTrackingToken } from '../../mail/tracking.ts';
import { recordClick, recordOpen } from './service.ts';

/** The smallest transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

const NO_CACHE = {
  'cache-control': 'no-cache, no-store, must-revalidate, max-age=0, private',
  pragma: 'no-cache',
  expires: '0',
};

// A wildcard, not `:token`: click tokens carry their URL and may exceed the router's parameter length limit.
const tokenParams = z.object({ '*': z.string().min(1).max(4096) });

/**
 * `GET /t/o/:token` (open pixel) and `GET /t/c/:token` (click redirect). No authentication: the
 * signed token is the credential. A forged or altered token is 404 and never redirects. Recording
 * failures never cost the recipient the pixel or the redirect.
 */
export function trackingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const tokenOf = (params: unknown, kind: 'open' | 'click') => {
    const parsed = tokenParams.safeParse(params);
    const token = parsed.success ? verifyTrackingToken(ctx.config.jwtSecret, parsed.data['*']) : null;
    if (!token || token.kind !== kind) throw notFound('link', parsed.success ? parsed.data['*'].slice(0, 64) : '');
    return token;
  };
  const safely = async (reply: FastifyReply, work: Promise<unknown>) => {
    await work.catch((err) => reply.log.error({ err }, 'recording an open or click failed'));
  };

  app.get('/t/o/*', async (req, reply) => {
    const token = tokenOf(req.params, 'open');
    await safely(reply, recordOpen(ctx, token.emailId));
    return reply.status(200).headers({ ...NO_CACHE, 'content-type': 'image/gif' }).send(PIXEL);
  });

  app.get('/t/c/*', async (req, reply) => {
    const token = tokenOf(req.params, 'click');
    if (token.kind !== 'click' || !isTrackableUrl(token.url)) throw notFound('link', '');
    await safely(reply, recordClick(ctx, token.emailId, token.url));
    // The WHATWG serialisation percent-encodes what an HTTP header cannot carry.
    return reply.status(302).headers({ ...NO_CACHE, location: new URL(token.url).href }).send();
  });
}
