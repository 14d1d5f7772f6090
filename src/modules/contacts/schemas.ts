import { z } from 'zod';
import { PREFIXED_ID } from '../../db/ids.ts';
import { lengthFirst } from '../../http/bounded-array.ts';
import { SimpleError } from '../../http/errors.ts';
import { component } from '../../http/openapi.ts';
import { dirParam, fallbackEnum, limitParam } from '../../http/pagination.ts';
import { parse } from '../../http/validate.ts';
import { customDataSchema } from './custom-data.ts';
import { isStorableText } from '../../db/storable-text.ts';
import { fieldUsersSchema } from '../usage/schemas.ts';

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

/**
 * Whether Herald takes the address where it stores or sends (contacts, /v1/send, import):
 * /v1/verify calls anything else invalid, so "valid" means Herald can use it.
 */
export const isWritableEmail = (address: string): boolean => emailSchema.safeParse(address).success;

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
    emails: lengthFirst(
      z.array(z.string().trim().max(254).email('Invalid email address')).min(1, 'At least one email is required').max(500, 'At most 500 emails per lookup'),
    ),
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

// Responses (the document and the strict response check: src/http/openapi.ts)

export const contactSchema = component(
  'Contact',
  z.object({
    id: z.string().describe('cnt_<id>'),
    email: z.string(),
    subscribed: z.boolean(),
    snoozedUntil: z.string().nullable(),
    data: z.record(z.unknown()).describe('Custom fields'),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const savedContactSchema = contactSchema.extend({ _meta: z.object({ isNew: z.boolean(), isUpdate: z.boolean() }) });

export const lookupResultSchema = z.object({
  found: z.array(z.object({ id: z.string(), email: z.string() })),
  notFound: z.array(z.string()),
});

export const fieldListSchema = z.object({
  fields: z.array(
    z.object({
      field: z.string().describe('Bare name for standard fields, data.<key> for custom ones'),
      type: z.enum(['string', 'number', 'boolean', 'date']),
      isCustom: z.boolean(),
      coverage: z.number().min(0).max(1),
    }),
  ),
});

export const fieldValuesSchema = z.object({ field: z.string(), values: z.array(z.unknown()), count: z.number().int() });

export const fieldUsageSchema = fieldUsersSchema.extend({ contactCount: z.number().int(), canDelete: z.boolean() });

export const fieldDeletedSchema = z.object({ deletedFrom: z.number().int() });
