import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { contacts } from '../../db/schema/contacts.ts';
import { projects } from '../../db/schema/users.ts';
import { ApiError } from '../../http/errors.ts';
import { escapeHtml, stringsFor } from '../../mail/locales.ts';
import { SYSTEM_MAIL_QUEUE } from '../../mail/system-mail.ts';
import { type LinkAction, type LinkToken, claimsOfSignedLinkToken, signLinkToken, verifyLinkToken } from '../../render/link-tokens.ts';
import { type Rule, admit, byAccount, byIp, firstInWindow } from '../auth/throttle.ts';
import { CONTACT_ID, emailSchema } from '../contacts/schemas.ts';
import { setSubscribed } from '../contacts/service.ts';
import { projectName } from '../projects/name.ts';
import { projectLanguage } from '../projects/settings.ts';

/**
 * What the recipient-facing pages do (the pages themselves are routes.ts): resolve a signed link
 * to its contact, change the subscription, and mail a fresh manage link for a link that no longer
 * works.
 */

/** "Send me a fresh link" requests: per client IP and per typed address (known or not), and one email per address and project per interval. */
const FRESH_LINK_IP: Rule = { name: 'fresh-link-ip', windowSeconds: 15 * 60, slowAfter: 5, lockAt: 20, lockSeconds: 15 * 60 };
const FRESH_LINK_ADDRESS: Rule = { name: 'fresh-link-address', windowSeconds: 60 * 60, slowAfter: 3, lockAt: 10, lockSeconds: 60 * 60 };
const FRESH_LINK_MAIL_INTERVAL_SECONDS = 5 * 60;

/**
 * What the pages show of a contact. Never its whole `data`: the public key's /v1/track can fill it
 * with up to 1 MB of JSON, and reading and parsing that on every page request cost a request
 * 7 ms of CPU and stalled the event loop for 750 ms under a flood of them.
 */
export type LinkedContact = { id: string; email: string; subscribed: boolean; locale: string | null };

export type ResolvedLink = { token: LinkToken; contact: LinkedContact; sender: string | null };

/** `data.locale` when it is a string (stringsFor reads anything else as English), extracted by PostgreSQL. */
const localeText = sql<string | null>`CASE WHEN jsonb_typeof(${contacts.data} -> 'locale') = 'string' THEN ${contacts.data} ->> 'locale' END`;

async function linkedContact(ctx: AppContext, projectId: string, contactId: string): Promise<LinkedContact | null> {
  if (!CONTACT_ID.test(contactId)) return null;
  const [contact] = await ctx.database.db
    .select({ id: contacts.id, email: contacts.email, subscribed: contacts.subscribed, locale: localeText })
    .from(contacts)
    .where(and(eq(contacts.id, contactId), eq(contacts.projectId, projectId)))
    .limit(1);
  return contact ?? null;
}

/** The contact a valid, unexpired link of one of the `allowed` actions points at, with the project's name; null otherwise. */
export async function resolveLink(ctx: AppContext, rawToken: string, allowed: LinkAction[]): Promise<ResolvedLink | null> {
  const token = verifyLinkToken(ctx.config.jwtSecret, rawToken);
  if (!token || !allowed.includes(token.action)) return null;
  const contact = await linkedContact(ctx, token.projectId, token.contactId);
  return contact ? { token, contact, sender: await projectName(ctx.database.db, token.projectId) } : null;
}

/**
 * The project of a link that does not work but carries our signature (expired, contact deleted,
 * another action): its name and language, and the contact the link was for. Null when nothing
 * about the link can be trusted.
 */
export async function projectOfBrokenLink(
  ctx: AppContext,
  rawToken: string,
): Promise<{ projectId: string; contactId: string; sender: string; language: string } | null> {
  const claims = claimsOfSignedLinkToken(ctx.config.jwtSecret, rawToken);
  const sender = claims ? await projectName(ctx.database.db, claims.projectId) : null;
  if (!claims || sender === null) return null;
  return { ...claims, sender, language: await projectLanguage(ctx, claims.projectId) };
}

/**
 * Sets the linked contact's subscription (an event when it changes); the contact as it is now. The
 * event names the email whose link it was (`emailId`), so that an unsubscribe counts for that
 * email's campaign only (migration 0030), not for every campaign the contact received before.
 */
export async function changeSubscription(ctx: AppContext, link: ResolvedLink, subscribed: boolean, source: string): Promise<LinkedContact> {
  const { projectId, emailId } = link.token;
  const changed = await setSubscribed(ctx.database.db, projectId, link.contact.id, subscribed, emailId ? { source, emailId } : { source });
  if (changed) return { ...link.contact, ...changed };
  return (await linkedContact(ctx, projectId, link.contact.id)) ?? link.contact;
}

/** A subscribe link for the same contact: the unsubscribed page offers to undo at once. */
export const resubscribeToken = (ctx: AppContext, link: ResolvedLink): string =>
  signLinkToken(ctx.config.jwtSecret, { projectId: link.token.projectId, contactId: link.contact.id, action: 'subscribe' });

export type FreshLinkOutcome =
  { kind: 'broken' } | { kind: 'limited'; retryAfter: number; sender: string; language: string } | { kind: 'answered'; sender: string; language: string };

/**
 * The "send me a fresh link" form of a broken link. Always the same answer, whether or not the
 * address is the link's contact (no enumeration); the fresh manage link goes by email to that
 * contact only, so only the address's owner can use it. Only the contact the link was sent to:
 * with any contact of the project, a project could have Herald's own address mail whomever it had
 * added as a contact, its name in the subject, with a link of its own; and not for a disabled
 * project.
 */
export async function requestFreshLink(ctx: AppContext, input: { token: string; email: string; ip: string }): Promise<FreshLinkOutcome> {
  const project = await projectOfBrokenLink(ctx, input.token);
  if (!project) return { kind: 'broken' };
  const { projectId, contactId, sender, language } = project;
  const email = emailSchema.safeParse(input.email);
  const address = email.success ? email.data : input.email.trim().toLowerCase();
  const keys = [byIp(FRESH_LINK_IP, input.ip), byAccount(FRESH_LINK_ADDRESS, address)];
  try {
    await admit(ctx, keys);
  } catch (err) {
    if (!(err instanceof ApiError) || err.statusCode !== 429) throw err;
    return { kind: 'limited', retryAfter: Number(err.details?.retryAfter ?? 60), sender, language };
  }
  // The same queries for every address (the interval is counted for strangers too), so the
  // answer's timing differs only by queueing the email.
  if (email.success && (await firstInWindow(ctx, `fresh-link-mail:${projectId}:${email.data}`, FRESH_LINK_MAIL_INTERVAL_SECONDS))) {
    const [contact] = await ctx.database.db
      .select({ id: contacts.id, email: contacts.email })
      .from(contacts)
      .innerJoin(projects, eq(projects.id, contacts.projectId))
      .where(and(eq(contacts.id, contactId), eq(contacts.projectId, projectId), eq(contacts.email, email.data), eq(projects.disabled, false)))
      .limit(1);
    if (contact) {
      const s = stringsFor(language);
      const link = `${ctx.config.publicUrl}/manage/${signLinkToken(ctx.config.jwtSecret, { projectId, contactId: contact.id, action: 'manage' })}`;
      await ctx.jobs.send(SYSTEM_MAIL_QUEUE, {
        to: contact.email,
        // Replacer functions: a `$&` or `$'` in the project's name is text, not a pattern.
        subject: s.freshLinkSubject.replace('{sender}', () => sender),
        html: `<p>${escapeHtml(s.freshLinkIntro).replace('{sender}', () => escapeHtml(sender))}</p><p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p><p>${escapeHtml(s.freshLinkIgnore)}</p>`,
      });
      ctx.jobs.wake(SYSTEM_MAIL_QUEUE);
    }
  }
  return { kind: 'answered', sender, language };
}
