import type { AppContext } from '../../../context.ts';
import { buildVariables } from '../../../render/variables.ts';
import type { UnsubscribeFooter } from '../../../mail/locales.ts';
import type { ContactRecord } from '../../contacts/service.ts';
import type { SenderDomain } from '../../domains/sender.ts';
import { trackingOptions } from '../../tracking/apply.ts';
import type { EmailRow as ClaimedEmail } from '../lifecycle.ts';
import type { StoredContent } from './content.ts';
import type { ProjectForMail } from '../../projects/settings.ts';

export type ComposedMessage = { raw: Buffer; subject: string; messageId: string };

const USES_UNSUBSCRIBE_URL = /\{\{-?\s*unsubscribeUrl\b/;

/**
 * The unsubscribe footer a MARKETING email gets (in the recipient's language, naming the project
 * and its postal address), unless its body places `{{unsubscribeUrl}}` itself. The preview shows
 * the same one (templates/preview.ts).
 */
export const marketingFooter = (
  type: string,
  bodySource: string,
  vars: Record<string, unknown>,
  project: Pick<ProjectForMail, 'name' | 'postalAddress'>,
): UnsubscribeFooter | null =>
  type === 'MARKETING' && !USES_UNSUBSCRIBE_URL.test(bodySource)
    ? { locale: vars.locale, unsubscribeUrl: String(vars.unsubscribeUrl), sender: project.name, postalAddress: project.postalAddress }
    : null;

/**
 * How long an email of a project whose messages are slow to compose (over SLOW_COMPOSE_MS on
 * average) may wait for a compose thread before it is given back to the queue (ComposeDeferredError;
 * delivery/index.ts, giveBack): its batch then ends, and the poller holding it takes the next.
 */
export const COMPOSE_WAIT_MS = 1000;

/**
 * Renders the email (its subject source and its shared content) for its contact and builds the
 * signed RFC 5322 message: HTML and text, Message-ID on the sending domain, custom headers,
 * attachments, and for MARKETING/HEADLESS mail the one-click List-Unsubscribe headers (RFC 8058)
 * plus, for MARKETING, the localized footer naming the project (and its postal address when set).
 */
export async function composeMessage(
  ctx: AppContext,
  email: ClaimedEmail,
  content: StoredContent,
  contact: ContactRecord | null,
  sender: SenderDomain,
  project: ProjectForMail,
): Promise<ComposedMessage> {
  const vars = buildVariables({
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    projectId: email.projectId,
    emailId: email.id,
    contact: contact ?? { id: '', email: email.toEmail, data: {} },
    oneOff: content.variables,
    defaultLocale: project.language,
  });
  const headers: Record<string, string> = { ...content.headers };
  let footer: UnsubscribeFooter | null = null;
  if (email.type !== 'TRANSACTIONAL' && contact) {
    const unsubscribeUrl = String(vars.unsubscribeUrl);
    // HTTPS only: a mailto: address would need inbound mail that acts on it (docs/decisions.md).
    headers['List-Unsubscribe'] = `<${unsubscribeUrl}>`;
    headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
    headers['Precedence'] = 'bulk';
    footer = marketingFooter(email.type, content.bodySource, vars, project);
  }
  const messageId = `<${email.id}@${sender.domain}>`;
  const rendered = await ctx.threads.compose.compose(
    {
      subject: email.subjectSource,
      body: content.bodySource,
      vars,
      footer,
      tracking: trackingOptions(ctx, email, project.tracking),
      message: {
        messageId,
        date: ctx.clock.now(),
        from: { email: email.fromEmail, name: email.fromName },
        to: { email: email.toEmail, name: email.toName },
        replyTo: email.replyTo,
        headers,
        attachments: content.attachments,
      },
      dkim: { domain: sender.domain, selector: sender.dkimSelector, privateKeyPem: sender.dkimPrivateKeyPem },
    },
    { tenant: email.projectId, giveUpAfterMs: COMPOSE_WAIT_MS },
  );
  // A Uint8Array after the thread hop: the same bytes as a Buffer, without a copy.
  const raw = Buffer.from(rendered.raw.buffer, rendered.raw.byteOffset, rendered.raw.byteLength);
  return { raw, subject: rendered.subject, messageId };
}
