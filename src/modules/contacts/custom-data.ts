import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { isStorableText } from '../../db/storable-text.ts';

/**
 * The custom-data rules of api-spec § Custom fields, in one place. `/v1/send`, `/v1/track`,
 * `POST /contacts`, `PATCH /contacts/:id`, CSV import and workflow UPDATE_CONTACT all go
 * through `splitCustomData` (directly, or through `mergeCustomData` / `upsertContact`).
 */

export type FieldType = 'string' | 'number' | 'boolean' | 'date';

/** Silently dropped from incoming data. `__proto__` is ours: it must never become an own key. */
export const RESERVED_DATA_KEYS: ReadonlySet<string> = new Set([
  'id',
  'svc_id',
  'svc_email',
  'email',
  'unsubscribeUrl',
  'subscribeUrl',
  'manageUrl',
  '__proto__',
]);

/** Why a value cannot be stored as sent: text PostgreSQL refuses, a number JSON.parse made infinite (1e400), or nesting. */
type Unstorable = { problem: 'text' | 'number' | 'depth'; path: (string | number)[] };

const UNSTORABLE_MESSAGES: Record<Unstorable['problem'], string> = {
  text: 'data must not contain NUL characters or unpaired surrogates',
  number: 'data must not contain numbers out of range (at most ±1.7976931348623157e308)',
  depth: 'data must not nest deeper than 64 levels',
};

function findUnstorable(data: Record<string, unknown>): Unstorable | null {
  const path: (string | number)[] = []; // where the walk is; copied only for the answer
  const found = (problem: Unstorable['problem']): Unstorable => ({ problem, path: problem === 'number' ? [...path] : [] });
  const walk = (value: unknown): Unstorable | null => {
    if (typeof value === 'string') return isStorableText(value) ? null : found('text');
    if (typeof value === 'number') return Number.isFinite(value) ? null : found('number');
    if (typeof value !== 'object' || value === null) return null;
    if (path.length > 64) return found('depth');
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const problem = walkAt(i, value[i]);
        if (problem) return problem;
      }
      return null;
    }
    for (const [k, v] of Object.entries(value)) {
      if (!isStorableText(k)) return found('text');
      const problem = walkAt(k, v);
      if (problem) return problem;
    }
    return null;
  };
  const walkAt = (key: string | number, value: unknown): Unstorable | null => {
    path.push(key);
    const problem = walk(value);
    path.pop();
    return problem;
  };
  return walk(data);
}

/** Bounds of one request's `data`: its JSON size and its keys, counted at every level of nesting. */
export const DATA_LIMITS = { maxBytes: 256 * 1024, maxKeys: 1000 } as const;

const NEEDS_ESCAPE = /[\u0000-\u001f"\\]/;

/**
 * UTF-8 bytes of `s` as a JSON string, quotes and escapes included: U+0001 is 6 bytes (`\u0001`)
 * in every answer that carries it, and in PostgreSQL's text of it.
 */
function jsonStringBytes(s: string): number {
  return NEEDS_ESCAPE.test(s) ? Buffer.byteLength(JSON.stringify(s)) : Buffer.byteLength(s) + 2;
}

/**
 * Characters of a finite number as PostgreSQL prints it from jsonb: in plain notation, so `1e300`
 * is 301 digits and `1e-300` 302 characters (JavaScript's own form is never longer).
 */
export function storedNumberLength(n: number): number {
  const s = String(n);
  const e = s.indexOf('e');
  if (e < 0) return s.length;
  const exponent = Number(s.slice(e + 1));
  const digits = s.slice(0, e).replace(/[-.]/g, '').length;
  const sign = n < 0 ? 1 : 0;
  if (exponent < 0) return sign + 1 + 1 + (-exponent - 1) + digits; // 0.00ddd
  return sign + Math.max(digits, exponent + 1) + (digits > exponent + 1 ? 1 : 0); // ddd000 or dd.d
}

/**
 * The keys (at every level, arrays' objects included) and the JSON bytes of `value`: compact JSON
 * (what a reader is served), numbers counted as PostgreSQL prints them. Stops walking as soon as
 * either passes its limit, so an oversized value costs little.
 */
function measure(value: unknown): { keys: number; bytes: number } {
  const m = { keys: 0, bytes: 0 };
  const over = () => m.keys > DATA_LIMITS.maxKeys || m.bytes > DATA_LIMITS.maxBytes;
  const walk = (v: unknown, depth: number): void => {
    if (typeof v === 'string') m.bytes += jsonStringBytes(v);
    else if (typeof v === 'number') m.bytes += storedNumberLength(v);
    else if (typeof v !== 'object' || v === null) m.bytes += String(v).length;
    else if (depth <= 64) {
      const array = Array.isArray(v);
      const entries = Object.entries(v);
      // The opening bracket, then each entry with the comma or closing bracket after it.
      m.bytes += entries.length === 0 ? 2 : 1;
      for (const [k, item] of entries) {
        if (over()) return;
        if (!array) {
          m.keys += 1;
          m.bytes += jsonStringBytes(k) + 1;
        }
        m.bytes += 1;
        walk(item, depth + 1);
      }
    }
  };
  walk(value, 0);
  return m;
}

/** The JSON bytes of accepted `data` (customDataSchema), as it counts them. */
export const dataBytes = (data: Record<string, unknown> | undefined): number => (data === undefined ? 0 : measure(data).bytes);

/** The locale a `data.locale` value sets: through the `{ value, persistent }` wrapper. */
const localeValue = (v: unknown): unknown => (isOneOff(v) ? v.value : v);

/**
 * A JSON object whose text PostgreSQL can store, at most DATA_LIMITS in size and keys, with
 * finite numbers; `locale`, when given, is a string (or null to delete it), wrapped in
 * `{ value, persistent }` or not. A workflow execution's `context` is one; contact data is
 * customDataSchema.
 */
export const storableObjectSchema = z.record(z.string(), z.unknown()).superRefine((data, ctx) => {
  const size = measure(data);
  if (size.keys > DATA_LIMITS.maxKeys) {
    ctx.addIssue({
      code: z.ZodIssueCode.too_big,
      type: 'array',
      maximum: DATA_LIMITS.maxKeys,
      inclusive: true,
      message: `data must have at most ${DATA_LIMITS.maxKeys} keys (nested keys included)`,
    });
    return;
  }
  if (size.bytes > DATA_LIMITS.maxBytes) {
    ctx.addIssue({
      code: z.ZodIssueCode.too_big,
      type: 'string',
      maximum: DATA_LIMITS.maxBytes,
      inclusive: true,
      message: `data must be at most ${DATA_LIMITS.maxBytes / 1024} KB as JSON`,
    });
    return;
  }
  const unstorable = findUnstorable(data);
  if (unstorable?.problem === 'number') {
    ctx.addIssue({
      code: z.ZodIssueCode.too_big,
      type: 'number',
      maximum: Number.MAX_VALUE,
      inclusive: true,
      path: unstorable.path,
      message: UNSTORABLE_MESSAGES.number,
    });
  } else if (unstorable) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: UNSTORABLE_MESSAGES[unstorable.problem] });
  }
  const locale = localeValue(data.locale);
  if (locale !== undefined && locale !== null && typeof locale !== 'string') {
    ctx.addIssue({
      code: z.ZodIssueCode.invalid_type,
      path: isOneOff(data.locale) ? ['locale', 'value'] : ['locale'],
      expected: 'string',
      received: Array.isArray(locale) ? 'array' : (typeof locale as z.ZodParsedType),
      message: 'locale must be a string',
    });
  }
});

/**
 * The first key, along a chain of plain objects from `data`, that holds a dot, with its path.
 * `data.a.b` names the nested value a → b (filters, field list, field delete, `{{a.b}}`), so a
 * key "a.b" could never be told from it. A top-level dotted key sent as `null` is allowed: it
 * deletes a key stored before the rule. Arrays are not walked (no path reaches into them).
 */
function findDottedKey(data: Record<string, unknown>): { key: string; path: string[] } | null {
  const walk = (value: Record<string, unknown>, path: string[]): { key: string; path: string[] } | null => {
    for (const [k, v] of Object.entries(value)) {
      if (k.includes('.') && !(path.length === 0 && v === null)) return { key: k, path: [...path, k] };
      if (isPlainObject(v) && path.length < 64) {
        const found = walk(v, [...path, k]);
        if (found) return found;
      }
    }
    return null;
  };
  return walk(data, []);
}

export const dottedKeyMessage = (key: string) =>
  `data key '${key}' must not contain '.': nested values are reached as data.a.b, so a key with a dot is ambiguous; nest an object instead`;

/**
 * `data` as accepted at every edge that writes contact data (send, track, contacts, workflow
 * UPDATE_CONTACT): a storable object (storableObjectSchema) whose keys hold no dot.
 */
export const customDataSchema = storableObjectSchema.superRefine((data, ctx) => {
  const dotted = findDottedKey(data);
  if (dotted) ctx.addIssue({ code: z.ZodIssueCode.custom, path: dotted.path, message: dottedKeyMessage(dotted.key) });
});

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?Z$/;

function isCalendarDate(y: number, m: number, d: number): boolean {
  const t = new Date(Date.UTC(y, m - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

/** `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.sss]Z` naming a real calendar day and time. */
export function isDateString(value: string): boolean {
  const dateOnly = DATE_ONLY.exec(value);
  if (dateOnly) return isCalendarDate(+dateOnly[1], +dateOnly[2], +dateOnly[3]);
  const m = DATE_TIME.exec(value);
  if (!m) return false;
  return isCalendarDate(+m[1], +m[2], +m[3]) && +m[4] < 24 && +m[5] < 60 && +m[6] < 60;
}

/** The type a first-seen value gives its field; null for null, objects and arrays (never typed). */
export function inferFieldType(value: unknown): FieldType | null {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? 'number' : null;
    case 'boolean':
      return 'boolean';
    case 'string':
      return isDateString(value) ? 'date' : 'string';
    default:
      return null;
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `{ value, persistent: boolean }` and nothing else: the spec's per-value persistence wrapper. */
function isOneOff(v: unknown): v is { value: unknown; persistent: boolean } {
  if (!isPlainObject(v) || !('value' in v) || typeof v.persistent !== 'boolean') return false;
  return Object.keys(v).every((k) => k === 'value' || k === 'persistent');
}

/** What incoming data does to a contact: keys to set, keys to delete, and one-off values. */
export type DataChanges = {
  /** Persistent values to store (top-level keys; objects replace the stored value whole). */
  set: Record<string, unknown>;
  /** Keys sent as `null`: removed from the contact. */
  unset: string[];
  /** `{ value, persistent: false }` values, unwrapped: for this send or event only. */
  oneOff: Record<string, unknown>;
};

/**
 * Applies the Custom fields rules to incoming `data`: reserved keys and empty keys dropped,
 * `null` deletes, empty string ignored, `{ value, persistent: false }` one-off, `{ value,
 * persistent: true }` unwrapped and stored, anything else (primitives, objects, arrays) stored.
 */
export function splitCustomData(incoming: Record<string, unknown> | undefined): DataChanges {
  const set: [string, unknown][] = [];
  const unset: string[] = [];
  const oneOff: [string, unknown][] = [];
  for (const [key, raw] of Object.entries(incoming ?? {})) {
    if (key === '' || RESERVED_DATA_KEYS.has(key)) continue;
    let value = raw;
    if (isOneOff(raw)) {
      if (!raw.persistent) {
        oneOff.push([key, raw.value]);
        continue;
      }
      value = raw.value;
    }
    if (value === undefined || value === '') continue;
    if (value === null) unset.push(key);
    else set.push([key, value]);
  }
  // Object.fromEntries defines own properties, so no key can reach a prototype.
  return { set: Object.fromEntries(set), unset, oneOff: Object.fromEntries(oneOff) };
}

/** Applies incoming `data` to stored data per the Custom fields rules. Pure. */
export function mergeCustomData(
  current: Record<string, unknown>,
  incoming: Record<string, unknown> | undefined,
): { data: Record<string, unknown>; oneOff: Record<string, unknown>; changed: boolean } {
  const { set, unset, oneOff } = splitCustomData(incoming);
  const removed = new Set(unset);
  const entries = Object.entries(current).filter(([k]) => !removed.has(k) && !(k in set));
  const data = Object.fromEntries([...entries, ...Object.entries(set)]);
  return { data, oneOff, changed: !isDeepStrictEqual(normalise(current), normalise(data)) };
}

// Key order does not make data different (jsonb does not keep it either).
function normalise(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalise);
  if (isPlainObject(v))
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, normalise(v[k])]),
    );
  return v;
}

/**
 * The typed fields a set of stored values introduces: every primitive leaf, nested keys joined
 * with dots (`profile.tier`), so `data.profile.tier` filters find their type. Sorted by key, so
 * concurrent writers insert field rows in the same order.
 */
export function fieldTypesOf(set: Record<string, unknown>): { keys: string[]; types: FieldType[] } {
  const found = new Map<string, FieldType>();
  const walk = (prefix: string, value: unknown, depth: number) => {
    if (isPlainObject(value)) {
      if (depth >= 8) return;
      for (const [k, v] of Object.entries(value)) if (k !== '') walk(`${prefix}.${k}`, v, depth + 1);
      return;
    }
    const type = inferFieldType(value);
    if (type && prefix.length <= 255) found.set(prefix, type);
  };
  for (const [k, v] of Object.entries(set)) walk(k, v, 0);
  const keys = [...found.keys()].sort();
  return { keys, types: keys.map((k) => found.get(k)!) };
}
