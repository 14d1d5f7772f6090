import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { notFound } from '../../http/errors.ts';
import { type RouteDoc, describe } from '../../http/openapi.ts';
import { escapeHtml } from '../../mail/locales.ts';
import { type VerifiedTrackingToken, isTrackableUrl, verifyTrackingToken } from '../../mail/tracking.ts';
import { emailCreatedAt, recordClick, recordOpen } from './service.ts';

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
const doc = (operationId: string, summary: string, responses: RouteDoc['responses']) =>
  describe({ operationId, summary, tag: 'Tracking', access: 'none', responses, errors: [404] });

export function trackingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const tokenOf = (params: unknown, kind: 'open' | 'click') => {
    const parsed = tokenParams.safeParse(params);
    const token = parsed.success ? verifyTrackingToken(ctx.config.jwtSecret, parsed.data['*']) : null;
    if (!token || token.kind !== kind) throw notFound('link', parsed.success ? parsed.data['*'].slice(0, 64) : '');
    return token;
  };
  // Links live TRACKING_LINK_TTL_DAYS from signing (version-1 tokens: from the email's creation).
  const expired = async (token: VerifiedTrackingToken) => {
    const issuedAt = token.issuedAt ?? (await emailCreatedAt(ctx, token.emailId));
    return !issuedAt || ctx.clock.now().getTime() - issuedAt.getTime() > ctx.config.trackingLinkTtlDays * 86_400_000;
  };
  // A recording that fails is logged, and the pixel or the redirect still answers.
  const safely = async (reply: FastifyReply, work: Promise<boolean>): Promise<boolean> =>
    work.catch((err) => {
      reply.log.error({ err }, 'recording an open or click failed');
      return true;
    });
  // HEAD (link scanners, prefetchers) answers as GET would without counting an open or a click.
  const counts = (req: FastifyRequest) => req.method === 'GET';

  app.get(
    '/t/o/*',
    {
      schema: doc('tracking.open', 'Open pixel (a 1×1 GIF); the signed token is the credential', {
        200: { schema: null, contentType: 'image/gif', description: 'The pixel' },
      }),
    },
    async (req, reply) => {
      const token = tokenOf(req.params, 'open');
      if (counts(req) && !(await expired(token))) await safely(reply, recordOpen(ctx, token.emailId));
      return reply
        .status(200)
        .headers({ ...NO_CACHE, 'content-type': 'image/gif' })
        .send(PIXEL);
    },
  );

  app.get(
    '/t/c/*',
    {
      schema: doc('tracking.click', 'Click redirect to the link in the email', {
        302: { schema: null, description: 'To the original URL' },
        200: { schema: null, contentType: 'text/html', description: 'An expired link: a page naming where it led' },
      }),
    },
    async (req, reply) => {
      const token = tokenOf(req.params, 'click');
      if (token.kind !== 'click' || !isTrackableUrl(token.url)) throw notFound('link', '');
      if (await expired(token)) {
        // An old link is no redirect for anyone who finds it: the page names where it led instead.
        const href = escapeHtml(new URL(token.url).href);
        const page = `<!doctype html><html><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>Link expired</title></head><body style="font-family:sans-serif;max-width:40em;margin:4em auto;padding:0 1em"><h1>This link has expired</h1><p>It led to:</p><p><a href="${href}" rel="noreferrer nofollow">${href}</a></p></body></html>`;
        return reply
          .status(200)
          .headers({ ...NO_CACHE, 'content-type': 'text/html; charset=utf-8' })
          .send(page);
      }
      // An email that is gone (its project deleted or reset) redirects no more: a removed tenant's
      // links to a phishing page would otherwise go on working from this domain.
      const exists = counts(req) ? await safely(reply, recordClick(ctx, token.emailId, token.url)) : (await emailCreatedAt(ctx, token.emailId)) !== null;
      if (!exists) throw notFound('link', '');
      // The WHATWG serialisation percent-encodes what an HTTP header cannot carry.
      return reply
        .status(302)
        .headers({ ...NO_CACHE, location: new URL(token.url).href })
        .send();
    },
  );
}
