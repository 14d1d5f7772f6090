import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { stringsFor } from '../../mail/locales.ts';
import { type LinkAction, verifyLinkToken } from '../../render/link-tokens.ts';
import { type ContactRecord, getContact, setSubscribed } from '../contacts/service.ts';
import { PAGE_HEADERS, page } from './page.ts';

const tokenParams = z.object({ token: z.string().min(1).max(2000) });

/**
 * The pages behind unsubscribeUrl, subscribeUrl and manageUrl. GET shows a page with a form; POST
 * changes the subscription (for unsubscribe, also the RFC 8058 one-click POST that mail clients send).
 */
export function preferenceRoutes(app: FastifyInstance, ctx: AppContext): void {
  // One-click unsubscribe POSTs `List-Unsubscribe=One-Click` form-encoded; the body carries nothing we need.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 4096 }, (_req, body, done) =>
    done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );

  const resolve = async (req: FastifyRequest, allowed: LinkAction[]) => {
    const parsed = tokenParams.safeParse(req.params);
    const token = parsed.success ? verifyLinkToken(ctx.config.jwtSecret, parsed.data.token) : null;
    if (!token || !allowed.includes(token.action)) return null;
    const contact = await getContact(ctx.database.db, token.projectId, token.contactId).catch(() => null);
    return contact ? { token, contact } : null;
  };
  const invalid = (reply: FastifyReply) =>
    reply.status(404).headers(PAGE_HEADERS).send(page({ title: stringsFor('en').unsubscribeTitle, message: stringsFor('en').invalidLink }));
  const locale = (c: ContactRecord) => c.data.locale;
  const change = (c: ContactRecord, projectId: string, subscribed: boolean, source: string) =>
    setSubscribed(ctx.database.db, projectId, c.id, subscribed, { source });

  app.get('/unsubscribe/:token', async (req, reply) => {
    const found = await resolve(req, ['unsubscribe']);
    if (!found) return invalid(reply);
    const s = stringsFor(locale(found.contact));
    return reply.headers(PAGE_HEADERS).send(
      page({
        title: s.unsubscribeTitle,
        message: s.unsubscribeQuestion.replace('{email}', found.contact.email),
        form: { action: req.url, button: s.unsubscribeButton },
      }),
    );
  });

  app.post('/unsubscribe/:token', async (req, reply) => {
    const found = await resolve(req, ['unsubscribe']);
    if (!found) return invalid(reply);
    await change(found.contact, found.token.projectId, false, 'unsubscribe_link');
    const s = stringsFor(locale(found.contact));
    return reply.headers(PAGE_HEADERS).send(page({ title: s.unsubscribeTitle, message: s.unsubscribedDone.replace('{email}', found.contact.email) }));
  });

  app.get('/subscribe/:token', async (req, reply) => {
    const found = await resolve(req, ['subscribe']);
    if (!found) return invalid(reply);
    const s = stringsFor(locale(found.contact));
    return reply.headers(PAGE_HEADERS).send(
      page({ title: s.subscribeTitle, message: found.contact.email, form: { action: req.url, button: s.subscribeButton } }),
    );
  });

  app.post('/subscribe/:token', async (req, reply) => {
    const found = await resolve(req, ['subscribe']);
    if (!found) return invalid(reply);
    await change(found.contact, found.token.projectId, true, 'subscribe_link');
    const s = stringsFor(locale(found.contact));
    return reply.headers(PAGE_HEADERS).send(page({ title: s.subscribeTitle, message: s.subscribedDone.replace('{email}', found.contact.email) }));
  });

  const managePage = (req: FastifyRequest, reply: FastifyReply, c: ContactRecord) => {
    const s = stringsFor(locale(c));
    return reply.headers(PAGE_HEADERS).send(
      page({
        title: s.manageTitle,
        message: (c.subscribed ? s.manageSubscribed : s.manageUnsubscribed).replace('{email}', c.email),
        form: c.subscribed
          ? { action: req.url, button: s.unsubscribeButton, field: ['subscribed', 'false'] }
          : { action: req.url, button: s.subscribeButton, field: ['subscribed', 'true'] },
      }),
    );
  };

  app.get('/manage/:token', async (req, reply) => {
    const found = await resolve(req, ['manage']);
    if (!found) return invalid(reply);
    return managePage(req, reply, found.contact);
  });

  app.post('/manage/:token', async (req, reply) => {
    const found = await resolve(req, ['manage']);
    if (!found) return invalid(reply);
    const form = (req.body ?? {}) as Record<string, string>;
    const updated = await change(found.contact, found.token.projectId, form.subscribed === 'true', 'manage_link');
    return managePage(req, reply, updated ?? found.contact);
  });
}
