import { z } from 'zod';
import { component } from '../../http/openapi.ts';

/**
 * A project's name goes into email subjects (invitations, billing) and pages: no control
 * characters (CR/LF), no bidi overrides or isolates (which reorder the text around them), and at
 * least one visible character (not only zero-width or other invisible ones).
 */
const projectName = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .refine((s) => !/[\p{Cc}\u202A-\u202E\u2066-\u2069]/u.test(s), 'Must not contain control characters or bidi override/isolate characters')
  .refine((s) => /(?!\p{Default_Ignorable_Code_Point})[\p{L}\p{N}\p{P}\p{S}]/u.test(s), 'Must contain at least one visible character');

export const createProjectBody = z.object({
  name: projectName,
});

/** A BCP 47 language tag such as `en`, `de-AT` or `pt-BR` (not a language name), canonicalised. */
const languageTag = z
  .string()
  .trim()
  .max(35)
  .regex(/^[a-z]{2,3}(-[a-z]{4})?(-([a-z]{2}|\d{3}))?$/i, 'Must be a language tag such as en, de-AT or pt-BR')
  .transform((s) => Intl.getCanonicalLocales(s)[0]);

/** An IANA time zone such as `Europe/Berlin` (or `UTC`). */
const timeZone = z
  .string()
  .trim()
  .max(64)
  .regex(/^[A-Za-z][A-Za-z_]*(\/[A-Za-z0-9_+-]+){0,2}$/, 'Must be an IANA time zone such as Europe/Berlin or UTC')
  .refine(isTimeZone, 'Must be an IANA time zone such as Europe/Berlin or UTC');

function isTimeZone(s: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: s });
    return true;
  } catch {
    return false;
  }
}

export const updateProjectBody = z
  .object({
    name: projectName,
    tracking: z.enum(['ENABLED', 'DISABLED', 'MARKETING_ONLY']),
    language: languageTag,
    timezone: timeZone,
    /** Printed in the MARKETING footer; null or an empty string removes it. */
    postalAddress: z
      .string()
      .trim()
      .max(500)
      .nullable()
      .transform((s) => (s ? s : null)),
  })
  .partial()
  .strict();

export const projectIdParams = z.object({ id: z.string().min(1).max(100) });

export type ProjectRecord = {
  id: string;
  name: string;
  publicKey: string;
  /** The full key only in the responses that create or rotate it; null everywhere else. */
  secretKey: string | null;
  /** `sk_` and the key's first 8 characters, to tell keys apart. */
  secretKeyPrefix: string | null;
  disabled: boolean;
  disabledReason: string | null;
  tracking: 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';
  language: string;
  /** Signs WEBHOOK step calls (`X-Herald-Signature`); rotate with POST …/regenerate-webhook-secret. Null for a MEMBER. */
  webhookSecret: string | null;
  timezone: string;
  /** Printed in the footer of MARKETING mail when set (bulk-mail rules ask for one). */
  postalAddress: string | null;
  role: 'OWNER' | 'ADMIN' | 'MEMBER';
  createdAt: string;
  updatedAt: string;
};

// Responses (the document and the strict response check: src/http/openapi.ts)

export const projectSchema = component(
  'Project',
  z.object({
    id: z.string(),
    name: z.string(),
    publicKey: z.string(),
    secretKey: z.string().nullable().describe('The full key only in the responses that create or rotate it'),
    secretKeyPrefix: z.string().nullable(),
    disabled: z.boolean(),
    disabledReason: z.string().nullable(),
    tracking: z.enum(['ENABLED', 'DISABLED', 'MARKETING_ONLY']),
    language: z.string(),
    webhookSecret: z.string().nullable().describe('Signs WEBHOOK step calls; null for a MEMBER (shown to ADMIN and OWNER only)'),
    timezone: z.string(),
    postalAddress: z.string().nullable().describe('Printed in the footer of MARKETING mail'),
    role: z.enum(['OWNER', 'ADMIN', 'MEMBER']),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);
