/**
 * `{{variables}}` in WEBHOOK url, header values and body strings (decisions.md § 7). Deliberately
 * not Liquid: a plain lookup of a dotted path (`{{email}}`, `{{data.plan}}`, `{{event.orderId}}`)
 * with an optional fallback (`{{event.plan ?? "free"}}`), so a webhook config can never loop or
 * stall the worker. Missing values render as the empty string.
 */

export type Vars = Record<string, unknown>;

const TAG = /\{\{\s*([^{}]*?)\s*\}\}/g;
const EXPR = /^([\p{L}\p{N}_$.\- ]+?)\s*(?:\?\?\s*"((?:[^"\\]|\\.)*)")?$/u;
const MAX_OUTPUT = 64 * 1024;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value at a dotted path, own properties only. */
export function lookup(vars: Vars, path: string): unknown {
  let cur: unknown = vars;
  for (const part of path.split('.')) {
    if (!isPlainObject(cur) || !Object.hasOwn(cur, part)) return undefined;
    cur = cur[part];
  }
  return cur;
}

function valueOf(expr: string, vars: Vars): unknown {
  const m = EXPR.exec(expr);
  if (!m) return undefined;
  const v = lookup(vars, m[1].trim());
  if ((v === undefined || v === null || v === '') && m[2] !== undefined) return m[2].replace(/\\(.)/g, '$1');
  return v;
}

const text = (v: unknown): string => (v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** Replaces every `{{ path }}` in `source`; `encode` is applied to each inserted value (URL components). */
export function renderString(source: string, vars: Vars, encode: (s: string) => string = (s) => s): string {
  const out = source.replace(TAG, (_, expr: string) => encode(text(valueOf(expr, vars))));
  return out.length > MAX_OUTPUT ? out.slice(0, MAX_OUTPUT) : out;
}

/**
 * Renders every string of a JSON body. A string that is exactly one tag keeps the value's JSON
 * type (`"{{event.amount}}"` → 42), so numbers and objects from the context stay typed.
 */
export function renderJson(value: unknown, vars: Vars, depth = 0): unknown {
  if (depth > 32) return null;
  if (typeof value === 'string') {
    const whole = /^\{\{\s*([^{}]*?)\s*\}\}$/.exec(value);
    if (whole) {
      const v = valueOf(whole[1], vars);
      return v === undefined ? null : v;
    }
    return renderString(value, vars);
  }
  if (Array.isArray(value)) return value.map((v) => renderJson(v, vars, depth + 1));
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderJson(v, vars, depth + 1)]));
  return value;
}
