import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { UUID } from '../../db/ids.ts';
import type { WorkflowStepType } from '../../db/schema/workflows.ts';
import { ApiError, type FieldError, fieldErrors } from '../../http/errors.ts';
import { type Condition, type Filter, parseCondition, validateCondition } from '../../conditions/index.ts';
import { operatorsFor } from '../../conditions/operators.ts';
import { RESERVED_DATA_KEYS, customDataSchema } from '../contacts/custom-data.ts';
import { findTemplate } from '../templates/service.ts';
import { workflowEventName } from './event-name.ts';
import { isBlockedHost } from './network.ts';
import { customFieldTypes } from '../contacts/fields.ts';

/**
 * Step configs per type (decisions.md § 7), validated when a step is added or changed. Every
 * problem is a 400 BAD_REQUEST whose `errors` name the config field; the stored config is the
 * parsed one (defaults filled, a single CONDITION filter wrapped into a tree, reserved contact
 * keys dropped from UPDATE_CONTACT data).
 */

/** The types a client can add (TRIGGER is created with the workflow). */
export const STEP_TYPES = ['SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type AddableStepType = (typeof STEP_TYPES)[number];

export const MAX_DELAY_DAYS = 365;
export const MAX_WAIT_SECONDS = 365 * 24 * 3600;
const MAX_HEADERS = 50;
const MAX_BODY_BYTES = 64 * 1024;
const MAX_URL = 2048;

const DELAY_UNIT_MS = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 } as const;

const recipient = z.discriminatedUnion('type', [
  z.object({ type: z.literal('CONTACT') }).strict(),
  z.object({ type: z.literal('CUSTOM'), email: z.string().trim().toLowerCase().email().max(320) }).strict(),
]);

const sendEmail = z
  .object({
    templateId: z
      .string()
      .regex(UUID, 'templateId must be a template id (uuid)')
      .transform((s) => s.toLowerCase()),
    recipient: recipient.default({ type: 'CONTACT' }),
  })
  .strict();

const delay = z
  .object({
    amount: z.number().int('amount must be a whole number').min(1, 'amount must be at least 1'),
    unit: z.enum(['minutes', 'hours', 'days'], {
      errorMap: () => ({ message: "unit must be 'minutes', 'hours' or 'days'" }),
    }),
  })
  .strict()
  .superRefine((d, ctx) => {
    if (d.amount * DELAY_UNIT_MS[d.unit] > MAX_DELAY_DAYS * DELAY_UNIT_MS.days) {
      ctx.addIssue({
        code: z.ZodIssueCode.too_big,
        type: 'number',
        maximum: MAX_DELAY_DAYS,
        inclusive: true,
        path: ['amount'],
        message: `a delay can be at most ${MAX_DELAY_DAYS} days`,
      });
    }
  });

const waitForEvent = z
  .object({
    eventName: workflowEventName,
    timeout: z
      .number()
      .int('timeout is a whole number of seconds')
      .min(1, 'timeout must be at least 1 second')
      .max(MAX_WAIT_SECONDS, 'timeout can be at most one year (31536000 seconds)')
      .nullish(),
  })
  .strict();

const NO_CRLF = /^[^\r\n]*$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the sender sets itself: a config cannot forge the signature or break the framing. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'x-herald-signature', 'idempotency-key']);

const headerName = z
  .string()
  .min(1)
  .max(256)
  .refine((n) => TOKEN.test(n), "header names are HTTP tokens: letters, digits and !#$%&'*+.^_`|~- (no spaces, CR or LF)")
  .refine((n) => !RESERVED_HEADERS.has(n.toLowerCase()), 'this header is set by Herald and cannot be configured');

const webhook = z
  .object({
    url: z.string().min(1).max(MAX_URL),
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
    headers: z
      .record(headerName, z.string().max(998, 'header values can be at most 998 characters').regex(NO_CRLF, 'header values cannot contain CR or LF'))
      .refine((h) => Object.keys(h).length <= MAX_HEADERS, `at most ${MAX_HEADERS} headers`)
      .optional(),
    body: z.unknown().optional(),
  })
  .strict();

const updateContact = z.object({ data: customDataSchema.optional(), subscribed: z.boolean().optional() }).strict();

const exit = z.object({ reason: z.string().trim().max(500).optional() }).strict();

export type SendEmailConfig = z.output<typeof sendEmail>;
export type DelayConfig = z.output<typeof delay>;
export type WaitForEventConfig = { eventName: string; timeout?: number | null };
export type ConditionConfig = Condition;
export type WebhookConfig = z.output<typeof webhook>;
export type UpdateContactConfig = { data?: Record<string, unknown>; subscribed?: boolean };
export type ExitConfig = z.output<typeof exit>;
export type TriggerConfig = Record<string, never>;

export type StepConfig =
  SendEmailConfig | DelayConfig | WaitForEventConfig | ConditionConfig | WebhookConfig | UpdateContactConfig | ExitConfig | TriggerConfig;

/** The milliseconds a DELAY step waits. */
export const delayMs = (c: DelayConfig): number => c.amount * DELAY_UNIT_MS[c.unit];

export function stepError(message: string, errors: FieldError[], type?: string): ApiError {
  return new ApiError(400, 'BAD_REQUEST', message, { errors, details: type ? { type } : undefined });
}

function fromZod(type: string, err: z.ZodError): ApiError {
  const errors = fieldErrors(err, ['config']);
  const first = errors[0];
  return stepError(`Invalid ${type} config: ${first.field} ${first.message}`, errors, type);
}

/** `ftp:`, a URL without host, a blocked literal address; `{{variables}}` only after the host. */
function checkWebhookUrl(url: string, allowPrivate: boolean): string | null {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)/i.exec(url);
  if (!scheme) return 'url must be an absolute http:// or https:// URL with a host';
  if (!['http', 'https'].includes(scheme[1].toLowerCase())) return `url must use http or https, not ${scheme[1]}`;
  if (scheme[2] === '' || scheme[2].startsWith('@') || scheme[2].startsWith(':')) return 'url needs a host';
  if (scheme[2].includes('{{') || scheme[2].includes('}}')) return 'url cannot have {{variables}} in its host';
  let parsed: URL;
  try {
    parsed = new URL(url.replace(/\{\{[^{}]*\}\}/g, 'x'));
  } catch {
    return 'url is not a valid URL';
  }
  if (parsed.hostname === '') return 'url needs a host';
  if (parsed.username !== '' || parsed.password !== '') return 'url cannot carry credentials; use a header';
  if (!allowPrivate && isBlockedHost(parsed.hostname)) {
    return `url points to a private, loopback, link-local or metadata address (${parsed.hostname}); set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it`;
  }
  return null;
}

/** A CONDITION config: a tree `{ logic, groups }` or one filter `{ field, operator, value?, unit? }`. */
function asTree(input: unknown): unknown {
  if (typeof input === 'object' && input !== null && !Array.isArray(input) && 'field' in input && !('groups' in input)) {
    return { logic: 'AND', groups: [{ filters: [input] }] };
  }
  return input;
}

const ACTIVITY_OPERATORS = new Set(operatorsFor('activity'));

/**
 * In a CONDITION step, `event.<key>` with a value operator (equals, gt, exists, …) reads the
 * execution context (the triggering event's data, the start call's context, awaited events' data):
 * this returns `<key>`. With an activity operator (triggered, countAtLeast, …) it keeps its segment
 * meaning, the contact's tracked events, and this returns null.
 */
export function contextFilterKey(f: Filter): string | null {
  if (!f.field.startsWith('event.') || ACTIVITY_OPERATORS.has(f.operator)) return null;
  return f.field.slice('event.'.length);
}

/** Context filters are checked and evaluated as `data.__ctx__.<key>` against data carrying the context there. */
export const CONTEXT_DATA_KEY = '__ctx__';

function renameFields(c: Condition, rename: (f: Filter) => string): Condition {
  return {
    logic: c.logic,
    groups: c.groups.map((g) => {
      const group: Condition['groups'][number] = { filters: g.filters.map((f) => ({ ...f, field: rename(f) })) };
      if (g.conditions) group.conditions = renameFields(g.conditions, rename);
      return group;
    }),
  };
}

/**
 * The stored CONDITION tree as the condition engine evaluates it: context filters become
 * `data.__ctx__.<key>`; evaluate against the contact with `data.__ctx__` set to the execution context.
 */
export function conditionForEvaluation(stored: Condition): Condition {
  return renameFields(stored, (f) => {
    const key = contextFilterKey(f);
    return key === null ? f.field : `data.${CONTEXT_DATA_KEY}.${key}`;
  });
}

const CONTEXT_FIELD = `data.${CONTEXT_DATA_KEY}.`;

/** Renames context filters before parsing, so the engine checks operators and values; restores them after. */
function renameForChecking(input: unknown): unknown {
  // Deeper than any valid tree (parseCondition refuses it) is left as is: a hostile body cannot exhaust the stack.
  const walk = (node: unknown, depth: number): unknown => {
    if (depth > 100) return node;
    if (Array.isArray(node)) return node.map((n) => walk(n, depth + 1));
    if (typeof node !== 'object' || node === null) return node;
    const o = node as Record<string, unknown>;
    if (typeof o.field === 'string' && typeof o.operator === 'string') {
      const key = contextFilterKey(o as Filter);
      return key === null ? o : { ...o, field: `${CONTEXT_FIELD}${key}` };
    }
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, walk(v, depth + 1)]));
  };
  return walk(input, 0);
}

/** Whether a JSON value nests at most `max` levels (checked without deep recursion past the limit). */
function nestsAtMost(value: unknown, max: number, depth = 0): boolean {
  if (typeof value !== 'object' || value === null) return true;
  if (depth >= max) return false;
  return Object.values(value).every((v) => nestsAtMost(v, max, depth + 1));
}

/** A valid tree (10 levels, scalar or list values) nests far less; deeper input is refused before it is walked. */
const MAX_CONDITION_NESTING = 64;

async function parseConditionConfig(db: Db, projectId: string, input: unknown): Promise<Condition> {
  if (!nestsAtMost(input, MAX_CONDITION_NESTING)) {
    throw stepError(
      `Invalid CONDITION config: it nests deeper than ${MAX_CONDITION_NESTING} levels`,
      [{ field: 'config', message: `at most ${MAX_CONDITION_NESTING} levels deep`, code: 'too_big' }],
      'CONDITION',
    );
  }
  try {
    const checked = parseCondition(renameForChecking(asTree(input)));
    await validateCondition(db, projectId, checked, { types: await customFieldTypes(db, projectId) });
    return renameFields(checked, (f) => (f.field.startsWith(CONTEXT_FIELD) ? `event.${f.field.slice(CONTEXT_FIELD.length)}` : f.field));
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const at = typeof err.details?.path === 'string' ? `config.${err.details.path}` : 'config';
    const message = err.message.replaceAll(CONTEXT_FIELD, 'event.');
    const details: Record<string, unknown> = { type: 'CONDITION', ...err.details };
    if (typeof details.field === 'string') details.field = details.field.replace(CONTEXT_FIELD, 'event.');
    throw new ApiError(400, 'BAD_REQUEST', `Invalid CONDITION config: ${message}`, {
      errors: [{ field: at, message, code: 'invalid_condition' }],
      details,
    });
  }
}

/**
 * Parses and checks a step config for its type. `ctx` gives the configuration (private webhook
 * targets) and the database (the template of SEND_EMAIL, field types and segments of CONDITION).
 */
export async function parseStepConfig(ctx: AppContext, db: Db, projectId: string, type: WorkflowStepType, input: unknown): Promise<StepConfig> {
  const raw = input ?? {};
  switch (type) {
    case 'TRIGGER':
      return {};
    case 'SEND_EMAIL': {
      const r = sendEmail.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      const template = await findTemplate(db, projectId, r.data.templateId);
      if (!template) {
        throw stepError(
          `Invalid SEND_EMAIL config: template ${r.data.templateId} does not exist in this project`,
          [{ field: 'config.templateId', message: 'template not found in this project', code: 'not_found' }],
          type,
        );
      }
      return r.data;
    }
    case 'DELAY': {
      const r = delay.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      return r.data;
    }
    case 'WAIT_FOR_EVENT': {
      const r = waitForEvent.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      const out: WaitForEventConfig = { eventName: r.data.eventName };
      if (r.data.timeout != null) out.timeout = r.data.timeout;
      return out;
    }
    case 'CONDITION':
      return parseConditionConfig(db, projectId, raw);
    case 'WEBHOOK': {
      const r = webhook.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      const problem = checkWebhookUrl(r.data.url, ctx.config.webhookAllowPrivateNetworks);
      if (problem) throw stepError(`Invalid WEBHOOK config: ${problem}`, [{ field: 'config.url', message: problem, code: 'invalid_url' }], type);
      if (r.data.body !== undefined && !nestsAtMost(r.data.body, 32)) {
        throw stepError(
          'Invalid WEBHOOK config: body nests deeper than 32 levels',
          [{ field: 'config.body', message: 'at most 32 levels deep', code: 'too_big' }],
          type,
        );
      }
      if (r.data.body !== undefined && Buffer.byteLength(JSON.stringify(r.data.body) ?? '') > MAX_BODY_BYTES) {
        throw stepError('Invalid WEBHOOK config: body is larger than 64 KB', [{ field: 'config.body', message: 'at most 64 KB', code: 'too_big' }], type);
      }
      if (r.data.body !== undefined && r.data.method === 'GET') {
        throw stepError(
          'Invalid WEBHOOK config: a GET request has no body',
          [{ field: 'config.body', message: 'a GET request has no body', code: 'custom' }],
          type,
        );
      }
      return r.data;
    }
    case 'UPDATE_CONTACT': {
      const r = updateContact.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      const out: UpdateContactConfig = {};
      if (r.data.data) {
        // The custom-data rules drop reserved keys (email, id, …) wherever data comes in.
        const kept = Object.entries(r.data.data).filter(([k]) => k !== '' && !RESERVED_DATA_KEYS.has(k));
        if (kept.length > 0) out.data = Object.fromEntries(kept);
      }
      if (r.data.subscribed !== undefined) out.subscribed = r.data.subscribed;
      if (out.data === undefined && out.subscribed === undefined) {
        throw stepError(
          'Invalid UPDATE_CONTACT config: nothing to update (reserved keys such as email and id are dropped)',
          [{ field: 'config', message: 'needs data (with a non-reserved key) or subscribed', code: 'custom' }],
          type,
        );
      }
      return out;
    }
    case 'EXIT': {
      const r = exit.safeParse(raw);
      if (!r.success) throw fromZod(type, r.error);
      return r.data.reason ? { reason: r.data.reason } : {};
    }
  }
}
