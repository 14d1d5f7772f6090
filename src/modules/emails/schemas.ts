import { z } from 'zod';
import type { EmailStatus, EmailType } from '../../db/schema/emails.ts';
import { lengthFirst } from '../../http/bounded-array.ts';
import { fieldErrors, validationError } from '../../http/errors.ts';
import { component, envelope } from '../../http/openapi.ts';
import { customDataSchema } from '../contacts/custom-data.ts';

const NO_CRLF = /^[^\r\n]*$/;
export const email = z.string().trim().toLowerCase().max(254).email();

const namedAddress = z.object({ name: z.string().max(256).regex(NO_CRLF, 'must not contain line breaks').optional(), email }).strict();
const address = z.union([email, namedAddress]);

/**
 * Headers a request cannot set: those Herald writes itself, and those the mail servers on the way
 * write (trace and authentication results), which a message must not arrive already carrying.
 */
const RESERVED_HEADERS = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'reply-to',
  'return-path',
  'sender',
  'mime-version',
  'dkim-signature',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'precedence',
  'received',
  'received-spf',
  'errors-to',
  'authentication-results',
  'delivered-to',
]);

/**
 * Whole families: `Content-*` describes the MIME structure Herald builds (a top-level
 * Content-Disposition made clients show the whole message as an attachment); `Resent-*` and
 * `ARC-*` are written by forwarders and relays.
 */
const RESERVED_HEADER_PREFIXES = ['content-', 'resent-', 'arc-'];

const isReservedHeader = (name: string) => {
  const lower = name.toLowerCase();
  return RESERVED_HEADERS.has(lower) || RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p));
};

/** Custom headers per message: a request's stored size stays proportional to what a message carries. */
export const MAX_CUSTOM_HEADERS = 100;

const headerValues = z.record(z.string().max(998).regex(NO_CRLF, 'must not contain CR or LF')).superRefine((h, ctx) => {
  for (const name of Object.keys(h)) {
    if (!/^[\x21-\x39\x3b-\x7e]{1,76}$/.test(name)) {
      ctx.addIssue({ code: 'custom', path: [name], message: 'Header names are printable ASCII without spaces, colons, CR or LF' });
    } else if (isReservedHeader(name)) {
      ctx.addIssue({ code: 'custom', path: [name], message: `Header ${name} is reserved: Herald or the mail servers on the way write it` });
    }
  }
});

// Counted before the values are checked: zod checks every value of a record, one issue per bad one
// (100,000 bad headers in a 1 MB body were 0.3 s and an 11 MB answer).
const headers = z.preprocess((h, ctx) => {
  if (typeof h !== 'object' || h === null || Array.isArray(h) || Object.keys(h).length <= MAX_CUSTOM_HEADERS) return h;
  ctx.addIssue({ code: 'too_big', type: 'array', maximum: MAX_CUSTOM_HEADERS, inclusive: true, message: `At most ${MAX_CUSTOM_HEADERS} custom headers` });
  return {};
}, headerValues);

// Groups of four characters, the last padded with at most two `=`: a length multiple of four and
// one run of the alphabet, tested without a repeated group (`(?:[…]{4})*` kept a backtracking
// entry per group, and overflowed V8's stack past about 3 MB of attachment: a 500).
const BASE64_TEXT = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64_WHITESPACE = /[\t\n\r ]+/g;
const isBase64 = (s: string) => s.length % 4 === 0 && BASE64_TEXT.test(s);
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;

const attachment = z
  .object({
    filename: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[^\r\n"]*$/, 'must not contain CR, LF or quotes'),
    // Line-wrapped base64 (76 columns and CRLF, as MIME and most encoders write it) is the same content.
    content: z
      .string()
      .transform((s) => s.replace(BASE64_WHITESPACE, ''))
      .refine((s) => s.length > 0, 'must not be empty')
      .refine(isBase64, 'must be base64'),
    contentType: z
      .string()
      .regex(/^[\w.+-]+\/[\w.+-]+$/, 'must be a MIME type such as application/pdf')
      .default('application/octet-stream'),
    contentId: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[^\s<>"]+$/, 'must not contain spaces, quotes or angle brackets')
      .optional(),
    disposition: z.enum(['attachment', 'inline']).optional(),
  })
  .strict()
  .refine((a) => a.disposition !== 'inline' || a.contentId, { message: 'Inline attachments need a contentId', path: ['contentId'] });

export const decodedSize = (base64: string) => Math.floor((base64.length * 3) / 4) - (base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0);

export const sendBody = z
  .object({
    to: z.union([address, lengthFirst(z.array(address).min(1).max(50))]),
    subject: z.string().min(1).max(998).regex(NO_CRLF, 'must not contain newline characters').optional(),
    body: z.string().min(1).optional(),
    template: z.string().min(1).max(100).optional(),
    from: address.optional(),
    name: z.string().max(256).regex(NO_CRLF, 'must not contain line breaks').optional(),
    subscribed: z.boolean().optional(),
    data: customDataSchema.optional(),
    headers: headers.optional(),
    reply: email.optional(),
    attachments: lengthFirst(z.array(attachment).max(10)).optional(),
    // Plunk's client sends `type: 'html'` with every email: the body is HTML, so that one value is
    // taken and changes nothing; any other (MARKETING, markdown) is refused with SEND_KEY_HINTS.type.
    type: z.literal('html', { errorMap: () => ({ message: "Only 'html' (the body is HTML)" }) }).optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (!b.template && (b.subject === undefined || b.body === undefined)) {
      for (const field of ['subject', 'body'] as const) {
        if (b[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `${field} is required when no template is given` });
      }
    }
    const total = (b.attachments ?? []).reduce((n, a) => n + decodedSize(a.content), 0);
    if (total > MAX_ATTACHMENT_BYTES) {
      ctx.addIssue({
        code: 'too_big',
        path: ['attachments'],
        maximum: MAX_ATTACHMENT_BYTES,
        type: 'array',
        inclusive: true,
        message: 'Attachments exceed 10 MB in total',
      });
    }
  });

export type SendBody = z.infer<typeof sendBody>;

/**
 * Keys /v1/send does not take that a client likely meant as something it does: an unknown key is
 * refused (a dropped `type` or `cc` sent other mail than asked), and these say what to use.
 */
const SEND_KEY_HINTS: Record<string, string> = {
  replyTo: "use 'reply' for the reply-to address",
  reply_to: "use 'reply' for the reply-to address",
  cc: "there is no cc: list each recipient in 'to' (each gets its own email)",
  bcc: "there is no bcc: list each recipient in 'to' (each gets its own email, which no other recipient sees)",
  type: "/v1/send mail takes its type from the template ('template'), TRANSACTIONAL without one; send MARKETING mail as a campaign or with a MARKETING template ('html', the one value taken, changes nothing)",
  text: "there is no plain-text field: the plain text is generated from 'body'",
  html: "use 'body' for the HTML",
  fromName: "use 'from': { name, email }",
  variables: "use 'data' for the template's variables",
};

/** The /v1/send body; an unknown key the client likely meant as another field gets a suggestion. */
export function parseSendBody(body: unknown): SendBody {
  const result = sendBody.safeParse(body);
  if (result.success) return result.data;
  const unknown = result.error.issues.flatMap((i) =>
    i.code === 'unrecognized_keys' && i.path.length === 0 ? i.keys : i.path.length === 1 && i.path[0] === 'type' ? ['type'] : [],
  );
  const hints = unknown.flatMap((k) => (Object.hasOwn(SEND_KEY_HINTS, k) ? [`${k}: ${SEND_KEY_HINTS[k]}`] : []));
  throw validationError(fieldErrors(result.error), { suggestion: hints.length > 0 ? hints.join('; ') : undefined });
}

export const emailIdParams = z.object({ id: z.string().min(1).max(100) });

export type EmailRecord = {
  id: string;
  projectId: string;
  contactId: string | null;
  to: string;
  toName: string | null;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  type: EmailType;
  status: EmailStatus;
  error: string | null;
  templateId: string | null;
  campaignId: string | null;
  workflowId: string | null;
  messageId: string | null;
  attempts: number;
  openCount: number;
  clickCount: number;
  sentAt: string | null;
  deliveredAt: string | null;
  openedAt: string | null;
  clickedAt: string | null;
  bouncedAt: string | null;
  complainedAt: string | null;
  createdAt: string;
  updatedAt: string;
};

// Responses (the document and the strict response check: src/http/openapi.ts)

export const EMAIL_STATUSES = ['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED'] as const;

const when = z.string().nullable();

export const emailRecordSchema = component(
  'Email',
  z.object({
    id: z.string(),
    projectId: z.string(),
    contactId: z.string().nullable(),
    to: z.string(),
    toName: z.string().nullable(),
    from: z.string(),
    fromName: z.string().nullable(),
    replyTo: z.string().nullable(),
    subject: z.string(),
    type: z.enum(['TRANSACTIONAL', 'MARKETING', 'HEADLESS']),
    status: z.enum(EMAIL_STATUSES),
    error: z.string().nullable(),
    templateId: z.string().nullable(),
    campaignId: z.string().nullable(),
    workflowId: z.string().nullable(),
    messageId: z.string().nullable(),
    attempts: z.number().int(),
    openCount: z.number().int(),
    clickCount: z.number().int(),
    sentAt: when,
    deliveredAt: when,
    openedAt: when,
    clickedAt: when,
    bouncedAt: when,
    complainedAt: when,
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const sendResultSchema = envelope(
  z.object({
    emails: z.array(
      z.object({
        contact: z.object({ id: z.string(), email: z.string() }),
        email: z.string().describe('The email id'),
        status: z.enum(EMAIL_STATUSES),
      }),
    ),
    timestamp: z.string(),
  }),
);
