import { z } from 'zod';
import type { TemplateType } from '../../db/schema/templates.ts';
import { SimpleError } from '../../http/errors.ts';
import { component } from '../../http/openapi.ts';
import { dirParam, fallbackEnum, pageParams, searchParam } from '../../http/pagination.ts';
import { messageContentFields } from './message-content.ts';

export const TEMPLATE_TYPES = ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'] as const satisfies readonly TemplateType[];

const noLineBreak = (v: string) => !/[\r\n]/.test(v);

const email = z.string().trim().toLowerCase().email().max(320);

/** An optional text field: null, absent or blank clears it. */
const optionalText = <T extends z.ZodTypeAny>(schema: T) => z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? null : v), schema.nullable());

const fields = {
  name: z.string().trim().min(1).max(200),
  description: optionalText(z.string().trim().max(2000)),
  subject: z.string().min(1).max(998).refine(noLineBreak, { message: 'subject must be a single line' }),
  body: z.string().min(1).max(1_000_000),
  from: email,
  fromName: optionalText(z.string().trim().max(200).refine(noLineBreak, { message: 'fromName must be a single line' })),
  replyTo: optionalText(email),
  type: z.enum(TEMPLATE_TYPES),
};

export const createTemplateBody = z.object({
  ...fields,
  description: fields.description.optional(),
  fromName: fields.fromName.optional(),
  replyTo: fields.replyTo.optional(),
  type: fields.type.default('MARKETING'),
});

export const updateTemplateBody = z.object(fields).partial();

export type CreateTemplateInput = z.output<typeof createTemplateBody>;
export type UpdateTemplateInput = z.output<typeof updateTemplateBody>;

const REQUIRED = ['name', 'subject', 'body', 'from'] as const;

/**
 * POST /templates: a missing (absent, null or blank) name, subject, body or from is the spec's 400
 * simple body; every other problem is a 422 from `createTemplateBody`.
 */
export function assertRequiredFields(body: unknown): void {
  const input = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const missing = REQUIRED.filter((k) => {
    const v = input[k];
    return v === undefined || v === null || (typeof v === 'string' && v.trim() === '');
  });
  if (missing.length === 1) throw new SimpleError(`${missing[0]} is required`);
  if (missing.length > 1) {
    throw new SimpleError(`${missing.slice(0, -1).join(', ')} and ${missing[missing.length - 1]} are required`);
  }
}

export const TEMPLATE_SORTS = ['name', 'createdAt', 'updatedAt'] as const;

export const listTemplatesQuery = pageParams(100).extend({
  type: z.preprocess((v) => (typeof v === 'string' ? (v.trim() === '' ? undefined : v.trim().toUpperCase()) : v), z.enum(TEMPLATE_TYPES).optional()),
  search: searchParam,
  sort: fallbackEnum(TEMPLATE_SORTS, 'createdAt'),
  dir: dirParam,
});

export type ListTemplatesQuery = z.output<typeof listTemplatesQuery>;

export const templateIdParams = z.object({ id: z.string() });

export type TemplateRecord = {
  id: string;
  projectId: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: TemplateType;
  createdAt: string;
  updatedAt: string;
};

// Responses (the document and the strict response check: src/http/openapi.ts)

export const templateSchema = component(
  'Template',
  z.object({
    ...messageContentFields,
    type: z.enum(TEMPLATE_TYPES),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const previewSchema = z.object({ subject: z.string(), html: z.string(), text: z.string() });
