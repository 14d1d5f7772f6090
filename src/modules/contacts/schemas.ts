import { z } from 'zod';
import { PREFIXED_ID } from '../../db/ids.ts';
import { SimpleError } from '../../http/errors.ts';
import { dirParam, fallbackEnum, limitParam } from '../../http/pagination.ts';
import { parse } from '../../http/validate.ts';
import { customDataSchema, isStorableText } from './custom-data.ts';

export type ContactRecord = {
  id: string;
  email: string;
  subscribed: boolean;
  snoozedUntil: string | null;
  data: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
};

export const CONTACT_ID = PREFIXED_ID('cnt');

/** RFC 5321 caps a forward path at 254 characters. Stored trimmed and lower-cased. */
export const emailSchema = z
  .string()
  .trim()
  .max(254, 'Email must be at most 254 characters')
  .email('Invalid email address')
  .transform((e) => e.toLowerCase());

/** Trimmed and lower-cased: the form contacts are stored and matched in. */
export const normaliseEmail = (email: string) => email.trim().toLowerCase();

export const createContactBody = z
  .object({
    email: emailSchema,
    subscribed: z.boolean().optional(),
    data: customDataSchema.optional(),
  })
  .strict();

export type CreateContactInput = z.output<typeof createContactBody>;

/** POST /contacts: a missing email is the spec's simple 400 body; anything else invalid is a 422. */
export function parseCreateContact(body: unknown): CreateContactInput {
  const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  if (!isObject || !('email' in body) || body.email === undefined) throw new SimpleError('email is required');
  return parse(createContactBody, body);
}

export const updateContactBody = z
  .object({
    email: emailSchema,
    subscribed: z.boolean(),
    data: customDataSchema,
  })
  .partial()
  .strict();

export type UpdateContactInput = z.output<typeof updateContactBody>;

export const contactIdParams = z.object({ id: z.string() });

export const CONTACT_SORTS = ['createdAt', 'email'] as const;
export type ContactSort = (typeof CONTACT_SORTS)[number];

export const listContactsQuery = z.object({
  limit: limitParam,
  cursor: z.string().max(2000).optional(),
  search: z.string().max(254).refine(isStorableText, 'search must not contain NUL characters').optional(),
  subscribed: z
    .enum(['true', 'false'], { message: "subscribed must be 'true' or 'false'" })
    .optional()
    .transform((v) => (v === undefined ? undefined : v === 'true')),
  sort: fallbackEnum(CONTACT_SORTS, 'createdAt'),
  dir: dirParam,
});

export type ListContactsQuery = z.output<typeof listContactsQuery>;

export const lookupBody = z
  .object({
    emails: z
      .array(z.string().trim().max(254).email('Invalid email address'))
      .min(1, 'At least one email is required')
      .max(500, 'At most 500 emails per lookup'),
  })
  .strict();

export const fieldParams = z.object({
  field: z.string().min(1).max(300).refine(isStorableText, 'field must not contain NUL characters'),
});

export const fieldValuesQuery = z.object({
  limit: z.coerce
    .number({ invalid_type_error: 'limit must be a number' })
    .int()
    .min(1)
    .default(100)
    .transform((n) => Math.min(n, 200)),
});
