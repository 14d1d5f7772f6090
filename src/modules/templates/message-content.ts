import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { checkTemplateSources } from '../../render/template-check.ts';
import { validationError } from '../../http/errors.ts';
import type { EmailType } from '../../db/schema/emails.ts';

/**
 * What a template and a campaign both are: a named message (subject and body in Liquid, sender,
 * type). Both modules save it through these two functions.
 */

export type MessageContentInput = {
  name: string;
  description?: string | null;
  subject: string;
  body: string;
  from: string;
  fromName?: string | null;
  replyTo?: string | null;
  type: EmailType;
};

/** Liquid that does not parse is refused when saved (422), so it never fails at send time. */
export async function assertTemplatesParse(ctx: AppContext, input: { subject?: string; body?: string }): Promise<void> {
  const errors = await checkTemplateSources(ctx.threads.compose, { subject: input.subject, body: input.body });
  if (errors.length > 0) throw validationError(errors);
}

/** The content columns of a new template or campaign row. */
export const messageContentValues = (input: MessageContentInput) => ({
  name: input.name,
  description: input.description ?? null,
  subject: input.subject,
  body: input.body,
  fromEmail: input.from,
  fromName: input.fromName ?? null,
  replyTo: input.replyTo ?? null,
  type: input.type,
});

/** The response fields of that shared content (spread into the Template and Campaign schemas). */
export const messageContentFields = {
  id: z.string(),
  projectId: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subject: z.string(),
  body: z.string(),
  from: z.string(),
  fromName: z.string().nullable(),
  replyTo: z.string().nullable(),
};
