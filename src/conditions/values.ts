/**
 * Value primitives shared by the operator table and the in-memory evaluator. Each one has a SQL
 * twin in compile.ts; keep the two in step (the property test checks them against each other).
 */

/**
 * Lower case, one code point at a time (Unicode simple case mapping): what PostgreSQL's lower()
 * does under a UTF-8 locale. JavaScript's toLowerCase alone would apply context rules (final
 * sigma) and turn 'İ' into two code points.
 */
export function foldCase(s: string): string {
  let out = '';
  for (const ch of s) out += ch === '\u0130' ? 'i' : ch.toLowerCase();
  return out;
}

const DAY_MS = 86_400_000;

/** A stored date: `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (the contact field rule). */
export const STORED_DATE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z)?$/;

function daysInMonth(y: number, m: number): number {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}

/**
 * The instant of a date stored in contact data, truncated to milliseconds; null when the value is
 * not such a date (or, with `fullOnly`, when it is a date without a time).
 */
export function storedDateInstant(value: unknown, fullOnly: boolean): number | null {
  if (typeof value !== 'string') return null;
  const m = STORED_DATE.exec(value);
  if (!m) return null;
  const [y, mo, d] = [+m[1], +m[2], +m[3]];
  if (y < 100 || mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return null;
  if (m[4] === undefined) return fullOnly ? null : Date.UTC(y, mo - 1, d);
  const [h, mi, s] = [+m[4], +m[5], +m[6]];
  if (h > 23 || mi > 59 || s > 59) return null;
  const ms = m[7] === undefined ? 0 : +m[7].slice(0, 3).padEnd(3, '0');
  return Date.UTC(y, mo - 1, d, h, mi, s, ms);
}

const DATE_TIME_VALUE = /^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2})?)(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})$/;
const MIN_INSTANT = Date.UTC(100, 0, 1);
const MAX_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * A date given in a filter: `YYYY-MM-DD` is that whole UTC day, a full ISO 8601 date-time (Z or
 * an offset) is that millisecond. Null when the value is neither.
 */
export function filterDateInterval(value: unknown): { from: number; to: number } | null {
  if (typeof value !== 'string') return null;
  const day = storedDateInstant(value, false);
  if (day !== null && value.length === 10) return { from: day, to: day + DAY_MS };
  const m = DATE_TIME_VALUE.exec(value);
  if (!m) return null;
  const ms = m[2] === undefined ? '' : `.${m[2].slice(0, 3)}`;
  const t = Date.parse(`${m[1]}${ms}${m[3]}`);
  if (Number.isNaN(t) || t < MIN_INSTANT || t > MAX_INSTANT || storedDateInstant(value.slice(0, 10), false) === null) return null;
  return { from: t, to: t + 1 };
}

const NUMERIC = /^\s*-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$/;

/** A finite number, or a string spelling one (decisions.md § 4: a numeric string value is accepted). */
export function toNumber(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && NUMERIC.test(value)) {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

export function toBoolean(value: unknown): boolean | null {
  if (typeof value === 'boolean') return value;
  if (value === 'true') return true;
  if (value === 'false') return false;
  return null;
}

/** The value at `path` in contact data, descending through plain objects only (never arrays or prototypes). */
export function dataAt(data: unknown, path: readonly string[]): unknown {
  let v: unknown = data;
  for (const key of path) {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}
