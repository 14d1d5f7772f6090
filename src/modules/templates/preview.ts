import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { validationError } from '../../http/errors.ts';
import { RenderLimitError, TemplateRenderError } from '../../render/engine.ts';
import { checkTemplateSources } from '../../render/template-check.ts';
import { buildVariables } from '../../render/variables.ts';
import { getContact } from '../contacts/service.ts';

export const previewTemplateBody = z.object({
  subject: z.string().max(998),
  body: z.string().max(1_000_000),
  /** Render with this contact's data; without it a sample contact with no data is used. */
  contactId: z.string().min(1).max(100).optional(),
});

export type PreviewInput = z.output<typeof previewTemplateBody>;
export type Preview = { subject: string; html: string; text: string };

const SAMPLE_CONTACT = { id: 'cnt_preview', email: 'preview@example.com', data: {} };

/**
 * Renders an unsaved subject and body for a contact, with the same sandbox and limits as a send:
 * on a compose thread, under its hard time limit. (On the event loop, converting a 1 MB body to
 * text took up to half a second, during which the process answered nothing else.) It goes ahead
 * of queued deliveries, so a campaign in progress does not hold it up.
 * Syntax errors, render errors and exceeded limits are 422 field errors on `subject` or `body`.
 */
export async function previewTemplate(ctx: AppContext, projectId: string, input: PreviewInput): Promise<Preview> {
  const syntax = await checkTemplateSources(ctx.threads.compose, { subject: input.subject, body: input.body });
  if (syntax.length > 0) throw validationError(syntax);
  const contact = input.contactId ? await getContact(ctx.database.db, projectId, input.contactId) : SAMPLE_CONTACT;
  const vars = buildVariables({
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    projectId,
    contact: { id: contact.id, email: contact.email, data: contact.data ?? {} },
  });
  try {
    return await ctx.threads.compose.compose({ subject: input.subject, body: input.body, vars, footer: null, tracking: null }, { ahead: true });
  } catch (err) {
    if (err instanceof TemplateRenderError) {
      throw validationError([{ field: err.field ?? 'body', message: err.message, code: 'render_error' }]);
    }
    if (err instanceof RenderLimitError) {
      throw validationError([{ field: 'body', message: err.message, code: 'render_limit' }]);
    }
    throw err;
  }
}
