import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { describer } from '../../http/openapi.ts';
import { stringsFor } from '../../mail/locales.ts';
import type { LinkAction } from '../../render/link-tokens.ts';
import { PAGE_HEADERS, brokenLinkPage, page } from './page.ts';
import { type LinkedContact, type ResolvedLink, changeSubscription, projectOfBrokenLink, requestFreshLink, resolveLink, resubscribeToken } from './service.ts';

const tokenParams = z.object({ token: z.string().min(1).max(2000) });
/** The manage page's form sends one of the two; anything else changes nothing (400). */
const manageBody = z.object({ subscribed: z.enum(['true', 'false']) });
const freshLinkBody = z.object({ token: z.string().min(1).max(2000), email: z.string().max(254) });

const doc = describer('Recipient pages', 'none');
const htmlPage = (description: string) => ({ schema: null, contentType: 'text/html', description });
type HtmlPage = ReturnType<typeof htmlPage>;
const pageDoc = (operationId: string, summary: string, extra: { body?: z.ZodTypeAny; bodyType?: 'form'; responses?: Record<number, HtmlPage> } = {}) =>
  doc({
    operationId,
    summary,
    params: tokenParams,
    body: extra.body,
    bodyType: extra.bodyType,
    responses: {
      200: htmlPage('The page'),
      404: htmlPage('The link does not work: names the project and offers a fresh link when the link is ours'),
      ...extra.responses,
    },
    // A recipient's choice is recorded whatever the server's disk: an unsubscribe must never wait.
    answeredWhenDiskFull: true,
    longPathAnsweredAsPage: true,
  });

/**
 * The pages behind unsubscribeUrl, subscribeUrl and manageUrl. GET shows a page with a form; POST
 * changes the subscription (for unsubscribe, also the RFC 8058 one-click POST that mail clients send).
 */
export function preferenceRoutes(app: FastifyInstance, ctx: AppContext): void {
  // One-click unsubscribe POSTs `List-Unsubscribe=One-Click` form-encoded; the body carries nothing we need.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 4096 }, (_req, body, done) =>
    done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );

  // The pages' forms, and mail clients' one-click POST (form-encoded or multipart, RFC 8058).
  const formPost = { config: { accepts: ['application/x-www-form-urlencoded', 'multipart/form-data'] } };
  const resolve = async (req: FastifyRequest, allowed: LinkAction[]): Promise<ResolvedLink | null> => {
    const parsed = tokenParams.safeParse(req.params);
    return parsed.success ? resolveLink(ctx, parsed.data.token, allowed) : null;
  };
  /** A link that does not work: the project's name and the fresh-link form when the link is ours, nothing otherwise. */
  const invalid = async (req: FastifyRequest, reply: FastifyReply) => {
    const raw = tokenParams.safeParse(req.params);
    const project = raw.success ? await projectOfBrokenLink(ctx, raw.data.token) : null;
    reply.status(404).headers(PAGE_HEADERS);
    if (!raw.success || !project) return reply.send(brokenLinkPage());
    const s = stringsFor(project.language);
    return reply.send(
      page({
        title: s.expiredTitle,
        sender: project.sender,
        message: s.expiredMessage,
        form: { action: '/fresh-link', button: s.sendLinkButton, field: ['token', raw.data.token], email: { name: 'email', label: s.emailLabel } },
      }),
    );
  };
  app.get('/unsubscribe/:token', { schema: pageDoc('pages.unsubscribe', 'The unsubscribe page (a form that confirms)') }, async (req, reply) => {
    const found = await resolve(req, ['unsubscribe']);
    if (!found) return invalid(req, reply);
    const s = stringsFor(found.contact.locale);
    return reply.headers(PAGE_HEADERS).send(
      page({
        title: s.unsubscribeTitle,
        sender: found.sender,
        message: s.unsubscribeQuestion.replace('{email}', found.contact.email),
        form: { action: req.url, button: s.unsubscribeButton },
      }),
    );
  });

  app.post(
    '/unsubscribe/:token',
    { ...formPost, schema: pageDoc('pages.unsubscribeConfirm', "Unsubscribes (the page's form, and RFC 8058 one-click POSTs from mail clients)") },
    async (req, reply) => {
      const found = await resolve(req, ['unsubscribe']);
      if (!found) return invalid(req, reply);
      await changeSubscription(ctx, found, false, 'unsubscribe_link');
      const s = stringsFor(found.contact.locale);
      // Unsubscribed by mistake: offer to undo it right here.
      const again = resubscribeToken(ctx, found);
      return reply.headers(PAGE_HEADERS).send(
        page({
          title: s.unsubscribeTitle,
          sender: found.sender,
          message: s.unsubscribedDone.replace('{email}', found.contact.email),
          form: { action: `/subscribe/${again}`, button: s.resubscribeButton },
        }),
      );
    },
  );

  app.get('/subscribe/:token', { schema: pageDoc('pages.subscribe', 'The subscribe-again page (a form that confirms)') }, async (req, reply) => {
    const found = await resolve(req, ['subscribe']);
    if (!found) return invalid(req, reply);
    const s = stringsFor(found.contact.locale);
    return reply
      .headers(PAGE_HEADERS)
      .send(page({ title: s.subscribeTitle, sender: found.sender, message: found.contact.email, form: { action: req.url, button: s.subscribeButton } }));
  });

  app.post('/subscribe/:token', { ...formPost, schema: pageDoc('pages.subscribeConfirm', 'Subscribes the contact again') }, async (req, reply) => {
    const found = await resolve(req, ['subscribe']);
    if (!found) return invalid(req, reply);
    await changeSubscription(ctx, found, true, 'subscribe_link');
    const s = stringsFor(found.contact.locale);
    return reply
      .headers(PAGE_HEADERS)
      .send(page({ title: s.subscribeTitle, sender: found.sender, message: s.subscribedDone.replace('{email}', found.contact.email) }));
  });

  const managePage = (req: FastifyRequest, reply: FastifyReply, c: LinkedContact, sender: string | null) => {
    const s = stringsFor(c.locale);
    return reply.headers(PAGE_HEADERS).send(
      page({
        title: s.manageTitle,
        sender,
        message: (c.subscribed ? s.manageSubscribed : s.manageUnsubscribed).replace('{email}', c.email),
        form: c.subscribed
          ? { action: req.url, button: s.unsubscribeButton, field: ['subscribed', 'false'] }
          : { action: req.url, button: s.subscribeButton, field: ['subscribed', 'true'] },
      }),
    );
  };

  app.get('/manage/:token', { schema: pageDoc('pages.manage', 'The subscription page: the current state and a button to change it') }, async (req, reply) => {
    const found = await resolve(req, ['manage']);
    if (!found) return invalid(req, reply);
    return managePage(req, reply, found.contact, found.sender);
  });

  app.post(
    '/manage/:token',
    {
      ...formPost,
      schema: pageDoc('pages.manageChange', 'Changes the subscription from the manage page', {
        body: manageBody,
        bodyType: 'form',
        responses: { 400: htmlPage('`subscribed` is neither `true` nor `false`: nothing changed, the manage page as it stands') },
      }),
    },
    async (req, reply) => {
      const found = await resolve(req, ['manage']);
      if (!found) return invalid(req, reply);
      const form = manageBody.safeParse(req.body ?? {});
      // Not what the form sends: the page as it stands, so the recipient sees their state and the right button.
      if (!form.success) return managePage(req, reply.status(400), found.contact, found.sender);
      const updated = await changeSubscription(ctx, found, form.data.subscribed === 'true', 'manage_link');
      return managePage(req, reply, updated, found.sender);
    },
  );

  // The form on a link that no longer works (service.ts: the same answer for every address).
  app.post(
    '/fresh-link',
    {
      config: { accepts: ['application/x-www-form-urlencoded'] },
      schema: doc({
        operationId: 'pages.freshLink',
        answeredWhenDiskFull: true,
        summary: "Mails a fresh manage link to the address if it is a contact of the broken link's project (the same answer either way)",
        body: freshLinkBody,
        bodyType: 'form',
        responses: { 200: htmlPage('The request was taken'), 404: htmlPage('The link is not ours'), 429: htmlPage('Too many requests (Retry-After)') },
      }),
    },
    async (req, reply) => {
      const body = freshLinkBody.safeParse(req.body ?? {});
      const outcome = body.success
        ? await requestFreshLink(ctx, { token: body.data.token, email: body.data.email, ip: req.ip })
        : ({ kind: 'broken' } as const);
      if (outcome.kind === 'broken') return reply.status(404).headers(PAGE_HEADERS).send(brokenLinkPage());
      const s = stringsFor(outcome.language);
      if (outcome.kind === 'limited') {
        return reply
          .status(429)
          .headers({ ...PAGE_HEADERS, 'retry-after': String(outcome.retryAfter) })
          .send(page({ title: s.expiredTitle, sender: outcome.sender, message: s.tooManyRequests }));
      }
      return reply.headers(PAGE_HEADERS).send(page({ title: s.expiredTitle, sender: outcome.sender, message: s.freshLinkSent }));
    },
  );
}
