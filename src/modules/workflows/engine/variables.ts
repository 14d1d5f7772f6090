/**
 * `{{variables}}` in WEBHOOK url, header values and body strings (decisions.md § 7). Deliberately
 * not Liquid: a plain lookup of a dotted path (`{{email}}`, `{{data.plan}}`, `{{event.orderId}}`)
 * with an optional fallback (`{{event.plan ?? "free"}}`), so a webhook config can never loop or
 * stall the worker. Missing values render as the empty string.
 *
 * Rendering is bounded while it runs, not after: a string stops growing at its limit, a JSON body
 * throws RenderLimitError as soon as it passes its limit, and each object value is serialised
 * once per Renderer however many tags name it (a 250 KB `{{data}}` repeated 6,000 times costs
 * one JSON.stringify, not 6,000).
 */

export type Vars = Record<string, unknown>;

const TAG = /\{\{\s*([^{}]*?)\s*\}\}/g;
const WHOLE_TAG = /^\{\{\s*([^{}]*?)\s*\}\}$/;
const EXPR = /^([\p{L}\p{N}_$.\- ]+?)\s*(?:\?\?\s*"((?:[^"\\]|\\.)*)")?$/u;
/** A rendered string (url, header value, body string) is cut to this many characters. */
export const MAX_OUTPUT = 64 * 1024;
const MAX_JSON_DEPTH = 32;

/** A rendered JSON body would be longer than its limit (`limit`, in characters). */
export class RenderLimitError extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(`rendered JSON is over ${limit} characters`);
    this.limit = limit;
  }
}

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

/**
 * A copy of `s` that shares no memory with it. `slice` of a long string is a view that keeps the
 * whole parent alive (a 64 KB cut of a 30 MB string holds 30 MB); UTF-16 round-trips exactly.
 */
const detached = (s: string): string => Buffer.from(s, 'utf16le').toString('utf16le');

/** The first `n` characters of `s`, never ending between the halves of a surrogate pair. */
function prefix(s: string, n: number): string {
  if (s.length <= n) return s;
  const code = s.charCodeAt(n - 1);
  return s.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}

/** Pieces of text up to `limit` characters; `add` reports whether there is room for more. */
class BoundedText {
  private readonly parts: string[] = [];
  private length = 0;
  private cut = false;
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }

  get room(): number {
    return this.limit - this.length;
  }

  add(piece: string): boolean {
    if (this.cut) return false;
    if (piece.length > this.room) {
      this.parts.push(prefix(piece, this.room));
      this.length = this.limit;
      this.cut = true;
      return false;
    }
    this.parts.push(piece);
    this.length += piece.length;
    return true;
  }

  toString(): string {
    const joined = this.parts.join('');
    return this.cut ? detached(joined) : joined;
  }
}

/** Renders the strings of one request against one set of variables, serialising each value once. */
export class Renderer {
  private readonly json = new Map<unknown, string>();
  private readonly vars: Vars;
  constructor(vars: Vars) {
    this.vars = vars;
  }

  /** A value's JSON text, computed once per value (objects by identity, strings by content). */
  private jsonOf(v: unknown): string {
    if (typeof v !== 'object' && typeof v !== 'string') return JSON.stringify(v) ?? 'null';
    let text = this.json.get(v);
    if (text === undefined) {
      text = JSON.stringify(v) ?? 'null';
      this.json.set(v, text);
    }
    return text;
  }

  private textOf(v: unknown): string {
    if (v === undefined || v === null) return '';
    if (typeof v === 'string') return v;
    return typeof v === 'object' ? this.jsonOf(v) : String(v);
  }

  /**
   * Replaces every `{{ path }}` in `source`; `encode` is applied to each inserted value (URL
   * components). The result is at most `limit` characters: rendering stops there.
   */
  string(source: string, encode?: (s: string) => string, limit = MAX_OUTPUT): string {
    const out = new BoundedText(limit);
    let last = 0;
    for (const m of source.matchAll(TAG)) {
      if (!out.add(source.slice(last, m.index))) return out.toString();
      const value = this.textOf(valueOf(m[1], this.vars));
      // Encoding only lengthens, so encoding the part that fits is enough.
      if (!out.add(encode ? encode(prefix(value, out.room)) : value)) return out.toString();
      last = m.index + m[0].length;
    }
    out.add(source.slice(last));
    return out.toString();
  }

  /**
   * The JSON text of a body config with every string rendered. A string that is exactly one tag
   * keeps the value's JSON type (`"{{event.amount}}"` → 42), so numbers and objects from the
   * context stay typed. Throws RenderLimitError once the text passes `limit` characters.
   */
  jsonBody(body: unknown, limit: number): string {
    const parts: string[] = [];
    let length = 0;
    const emit = (s: string) => {
      length += s.length;
      if (length > limit) throw new RenderLimitError(limit);
      parts.push(s);
    };
    const write = (value: unknown, depth: number): void => {
      if (depth > MAX_JSON_DEPTH) return emit('null');
      if (typeof value === 'string') {
        const whole = WHOLE_TAG.exec(value);
        if (!whole) return emit(JSON.stringify(this.string(value)));
        const v = valueOf(whole[1], this.vars);
        return emit(v === undefined ? 'null' : this.jsonOf(v));
      }
      if (Array.isArray(value)) {
        emit('[');
        value.forEach((item, i) => {
          if (i > 0) emit(',');
          write(item, depth + 1);
        });
        return emit(']');
      }
      if (isPlainObject(value)) {
        emit('{');
        Object.entries(value).forEach(([k, v], i) => {
          emit(`${i > 0 ? ',' : ''}${JSON.stringify(k)}:`);
          write(v, depth + 1);
        });
        return emit('}');
      }
      emit(this.jsonOf(value));
    };
    write(body, 0);
    return parts.join('');
  }
}

/** One string rendered on its own (see Renderer.string). */
export function renderString(source: string, vars: Vars, encode?: (s: string) => string): string {
  return new Renderer(vars).string(source, encode);
}
