import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';
import { validationError } from '../../http/errors.ts';
import { RenderLimitError, TemplateRenderError } from '../../render/engine.ts';
import { checkTemplateSources } from '../../render/template-check.ts';
import { buildVariables } from '../../render/variables.ts';
import { getContact } from '../contacts/service.ts';
import { marketingFooter } from '../emails/delivery/compose.ts';
import { projectForMail } from '../projects/settings.ts';

export const previewTemplateBody = z.object({
  subject: z.string().max(998),
  body: z.string().max(1_000_000),
  /** Render with this contact's data; without it a sample contact with no data is used. */
  contactId: z.string().min(1).max(100).optional(),
  /** MARKETING shows the unsubscribe footer a send adds (unless the body places `{{unsubscribeUrl}}`). */
  type: z.enum(['TRANSACTIONAL', 'MARKETING', 'HEADLESS']).optional(),
});

export type PreviewInput = z.output<typeof previewTemplateBody>;
export type Preview = { subject: string; html: string; text: string };

const SAMPLE_CONTACT = { id: 'cnt_preview', email: 'preview@example.com', data: {} };

/**
 * Previews one project may have rendering or waiting for a compose thread at once, in a process.
 * Previews run ahead of deliveries on the compose threads (one on a 2-core host), in one FIFO: a
 * heavy but valid preview holds a thread 0.6–1.3 s and answers 2.5 M characters, so 20 at once
 * from one project kept another tenant's preview waiting 14–25 s (40: up to 32 s, and the process
 * grew by 280–490 MB). A preview counts from its start until its render has settled.
 * Two let a user's editor have an answer in flight while the next keystroke's is asked for.
 */
export const PREVIEWS_PER_PROJECT = 2;
/**
 * Previews of all projects at once, in a process: bounds the queue of previews ahead of the
 * large-template checks of saves and sends (16 heavy previews: about 10–20 s of one thread),
 * and the answers held in memory until they are sent (16 × 2.5 M characters).
 */
export const PREVIEWS_PER_PROCESS = 16;

/** The counters of previews under way (ctx.previews). */
export const previewSlots = (perProject: number, perProcess: number): BusySlots =>
  busySlots({
    perProject,
    perProcess,
    projectBusy: `This project already has ${perProject} previews rendering`,
    processBusy: 'The server is busy rendering previews',
  });

/**
 * Renders an unsaved subject and body for a contact, with the same sandbox and limits as a send:
 * on a compose thread, under its hard time limit. (On the event loop, converting a 1 MB body to
 * text took up to half a second, during which the process answered nothing else.) It goes ahead
 * of queued deliveries, so a campaign in progress does not hold it up.
 * Syntax errors, render errors and exceeded limits are 422 field errors on `subject` or `body`.
 * Past PREVIEWS_PER_PROJECT or PREVIEWS_PER_PROCESS under way, a 429 at once (Retry-After: 1).
 */
export async function previewTemplate(ctx: AppContext, projectId: string, input: PreviewInput): Promise<Preview> {
  // Held until the threads are done with it, even when the client has gone: its work still runs.
  const release = ctx.previews.take(projectId);
  try {
    return await renderPreview(ctx, projectId, input);
  } finally {
    release();
  }
}

async function renderPreview(ctx: AppContext, projectId: string, input: PreviewInput): Promise<Preview> {
  const syntax = await checkTemplateSources(ctx.threads.compose, { subject: input.subject, body: input.body });
  if (syntax.length > 0) throw validationError(syntax);
  const contact = input.contactId ? await getContact(ctx.database.db, projectId, input.contactId) : SAMPLE_CONTACT;
  const project = await projectForMail(ctx, projectId);
  const vars = buildVariables({
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    projectId,
    contact: { id: contact.id, email: contact.email, data: contact.data ?? {} },
    defaultLocale: project.language,
  });
  const footer = input.type ? marketingFooter(input.type, input.body, vars, project) : null;
  try {
    return await ctx.threads.compose.compose({ subject: input.subject, body: input.body, vars, footer, tracking: null }, { ahead: true });
  } catch (err) {
    if (err instanceof TemplateRenderError) {
      throw validationError([{ field: err.field ?? 'body', message: err.message, code: 'render_error' }]);
    }
    if (err instanceof RenderLimitError) {
      throw validationError([{ field: err.field ?? 'body', message: err.message, code: 'render_limit' }]);
    }
    throw err;
  }
}
