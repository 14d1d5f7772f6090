import type { AppContext } from '../../../context.ts';
import { buildMessage } from '../../../mail/build-message.ts';
import { signMessage } from '../../../mail/dkim.ts';
import { appendToBody, unsubscribeFooter } from '../../../mail/locales.ts';
import { renderEmail } from '../../../render/engine.ts';
import { buildVariables } from '../../../render/variables.ts';
import type { ContactRecord } from '../../contacts/service.ts';
import type { SenderDomain } from '../../domains/sender.ts';
import { trackHtml } from '../../tracking/apply.ts';
import type { ClaimedEmail } from './claim.ts';

export type ComposedMessage = { raw: Buffer; subject: string; messageId: string };

const USES_UNSUBSCRIBE_URL = /\{\{-?\s*unsubscribeUrl\b/;

/**
 * Renders the email for its contact and builds the signed RFC 5322 message: HTML and text,
 * Message-ID on the sending domain, custom headers, attachments, and for MARKETING/HEADLESS mail
 * the one-click List-Unsubscribe headers (RFC 8058) plus, for MARKETING, the localized footer.
 */
export async function composeMessage(
  ctx: AppContext,
  email: ClaimedEmail,
  contact: ContactRecord | null,
  sender: SenderDomain,
): Promise<ComposedMessage> {
  const vars = buildVariables({
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    projectId: email.projectId,
    emailId: email.id,
    contact: contact ?? { id: '', email: email.toEmail, data: {} },
    oneOff: email.variables,
  });
  const rendered = await renderEmail({ subject: email.subjectSource, body: email.bodySource }, vars);
  const headers: Record<string, string> = { ...email.headers };
  let html = rendered.html;
  if (email.type !== 'TRANSACTIONAL' && contact) {
    const unsubscribeUrl = String(vars.unsubscribeUrl);
    const token = unsubscribeUrl.slice(unsubscribeUrl.lastIndexOf('/') + 1);
    headers['List-Unsubscribe'] = `<mailto:unsubscribe@${sender.domain}?subject=unsubscribe%20${token}>, <${unsubscribeUrl}>`;
    headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
    headers['Precedence'] = 'bulk';
    if (email.type === 'MARKETING' && !USES_UNSUBSCRIBE_URL.test(email.bodySource)) {
      html = appendToBody(html, unsubscribeFooter(vars.locale, unsubscribeUrl));
    }
  }
  html = await trackHtml(ctx, email, html);
  const messageId = `<${email.id}@${sender.domain}>`;
  const unsigned = await buildMessage({
    messageId,
    date: ctx.clock.now(),
    from: { email: email.fromEmail, name: email.fromName },
    to: { email: email.toEmail, name: email.toName },
    replyTo: email.replyTo,
    subject: rendered.subject,
    html,
    headers,
    attachments: email.attachments,
  });
  const raw = await signMessage(unsigned, {
    domain: sender.domain,
    selector: sender.dkimSelector,
    privateKeyPem: sender.dkimPrivateKeyPem,
  });
  return { raw, subject: rendered.subject, messageId };
}
