import { type Place, conditionError, quote } from './errors.ts';
import type { FieldKind } from './fields.ts';
import { type Access, type ActivitySource, type Node, type Scalar, type Test, and, not } from './ir.ts';
import { type FieldType, type Filter, UNITS, type Unit } from './types.ts';
import { filterDateInterval, foldCase, toBoolean, toNumber } from './values.ts';

/**
 * THE operator table (decisions.md § 4). For every operator: the field kinds it fits, what its
 * value (and unit) must be, and how it becomes plan nodes (ir.ts). The SQL compiler
 * and the in-memory evaluator only interpret those nodes, so this table is the single definition
 * of what every operator means. A negative operator is exactly NOT its positive twin, which is
 * what makes a missing value match only the negative ones.
 */

/** What the operator's `value` (and `unit`) must be. */
type Shape =
  | 'none' // ignored
  | 'scalar' // one value of the field's type
  | 'list' // an array of values of the field's type
  | 'duration' // an amount of `unit`s (unit required)
  | 'count'; // a number of occurrences, optionally within a window (`unit`, with value.within)

/** A converted `value`. */
export type Operand =
  | { shape: 'none' }
  | { shape: 'scalar'; value: Scalar }
  | { shape: 'instant'; from: number; to: number }
  | { shape: 'list'; values: Scalar[] }
  | { shape: 'duration'; ms: number }
  | { shape: 'count'; atLeast: number; windowMs: number | null };

/** The field a filter tests, resolved: a typed value, tracked activity, or segment membership. */
export type Target =
  { kind: 'value'; access: Access; type: FieldType; ci: boolean } | { kind: 'activity'; source: ActivitySource } | { kind: 'segment'; segmentId: string };

type Positive = {
  fits: readonly FieldKind[];
  shape: Shape;
  build: (target: Target, operand: Operand, now: number) => Node;
};

const VALUE_TYPES = ['string', 'number', 'boolean', 'date'] as const;

const value = (t: Target, test: Test): Node => {
  if (t.kind !== 'value') throw new Error('operator table: value operator on a non-value field');
  return { node: 'value', access: t.access, type: t.type, test };
};
const activity = (t: Target, from: number | null, to: number | null, atLeast = 1): Node => {
  if (t.kind !== 'activity') throw new Error('operator table: activity operator on a non-activity field');
  return { node: 'activity', source: t.source, from, to, atLeast };
};
const scalar = (o: Operand): Scalar => {
  if (o.shape !== 'scalar') throw new Error('operator table: expected a scalar operand');
  return o.value;
};
const duration = (o: Operand): number => (o.shape === 'duration' ? o.ms : 0);
const text = (o: Operand): string => foldCase(String(scalar(o)));
const ci = (t: Target, v: Scalar): Scalar => (t.kind === 'value' && t.ci && typeof v === 'string' ? foldCase(v) : v);

/** `greaterThan` and friends: numbers compare numerically, dates as instants (a day value is the whole day). */
const ordered = (op: '<' | '<=' | '>' | '>='): Positive => ({
  fits: ['number', 'date'],
  shape: 'scalar',
  build: (t, o) => {
    if (o.shape === 'instant') {
      const range = { '>': { from: o.to, to: null }, '>=': { from: o.from, to: null }, '<': { from: null, to: o.from }, '<=': { from: null, to: o.to } }[op];
      return value(t, { test: 'range', ...range, fullOnly: false });
    }
    return value(t, { test: 'compare', op, value: scalar(o) as number });
  },
});

const textMatch = (mode: 'contains' | 'startsWith' | 'endsWith'): Positive => ({
  fits: ['string'],
  shape: 'scalar',
  build: (t, o) => value(t, { test: 'text', mode, value: text(o) }),
});

const POSITIVE = {
  equals: {
    fits: VALUE_TYPES,
    shape: 'scalar',
    build: (t, o) =>
      o.shape === 'instant'
        ? value(t, { test: 'range', from: o.from, to: o.to, fullOnly: false })
        : value(t, { test: 'equals', value: ci(t, scalar(o)), ci: t.kind === 'value' && t.ci }),
  },
  contains: textMatch('contains'),
  startsWith: textMatch('startsWith'),
  endsWith: textMatch('endsWith'),
  greaterThan: ordered('>'),
  lessThan: ordered('<'),
  greaterThanOrEqual: ordered('>='),
  lessThanOrEqual: ordered('<='),
  in: {
    fits: ['string', 'number'],
    shape: 'list',
    build: (t, o) => value(t, { test: 'oneOf', values: o.shape === 'list' ? o.values.map((v) => ci(t, v)) : [], ci: t.kind === 'value' && t.ci }),
  },
  exists: { fits: VALUE_TYPES, shape: 'none', build: (t) => value(t, { test: 'present' }) },
  // within: now - value·unit ≤ field ≤ now; olderThan: field < now - value·unit. Full date-times only.
  within: {
    fits: ['date'],
    shape: 'duration',
    build: (t, o, now) => value(t, { test: 'range', from: now - duration(o), to: now + 1, fullOnly: true }),
  },
  olderThan: {
    fits: ['date'],
    shape: 'duration',
    build: (t, o, now) => value(t, { test: 'range', from: null, to: now - duration(o), fullOnly: true }),
  },
  triggered: { fits: ['activity'], shape: 'none', build: (t) => activity(t, null, null) },
  triggeredWithin: {
    fits: ['activity'],
    shape: 'duration',
    build: (t, o, now) => activity(t, now - duration(o), now + 1),
  },
  // The last occurrence is older than value·unit: some before the cut-off, none since.
  triggeredOlderThan: {
    fits: ['activity'],
    shape: 'duration',
    build: (t, o, now) => and([activity(t, null, now - duration(o)), not(activity(t, now - duration(o), null))]),
  },
  countAtLeast: {
    fits: ['activity'],
    shape: 'count',
    build: (t, o, now) => {
      if (o.shape !== 'count') throw new Error('operator table: expected a count operand');
      return o.windowMs === null ? activity(t, null, null, o.atLeast) : activity(t, now - o.windowMs, now + 1, o.atLeast);
    },
  },
  memberOf: {
    fits: ['segment'],
    shape: 'none',
    build: (t) => {
      if (t.kind !== 'segment') throw new Error('operator table: memberOf on a non-segment field');
      return { node: 'member', segmentId: t.segmentId };
    },
  },
} as const satisfies Record<string, Positive>;

type PositiveName = keyof typeof POSITIVE;

/** Each negative operator is NOT its positive twin. */
const NEGATIVE = {
  notEquals: 'equals',
  notContains: 'contains',
  notIn: 'in',
  notExists: 'exists',
  notTriggered: 'triggered',
  notTriggeredWithin: 'triggeredWithin',
  notMemberOf: 'memberOf',
} as const satisfies Record<string, PositiveName>;

const ALIASES = { gt: 'greaterThan', lt: 'lessThan', gte: 'greaterThanOrEqual', lte: 'lessThanOrEqual' } as const;

export type OperatorName = PositiveName | keyof typeof NEGATIVE;

export type OperatorDef = Positive & { name: OperatorName; negated: boolean };

/** The definition of an operator (aliases resolved), or null for an unknown one. */
export function operatorDef(name: string): OperatorDef | null {
  const canonical: string = Object.hasOwn(ALIASES, name) ? ALIASES[name as keyof typeof ALIASES] : name;
  if (Object.hasOwn(POSITIVE, canonical)) return { ...POSITIVE[canonical as PositiveName], name: canonical as PositiveName, negated: false };
  if (Object.hasOwn(NEGATIVE, canonical)) {
    const twin = NEGATIVE[canonical as keyof typeof NEGATIVE];
    return { ...POSITIVE[twin], name: canonical as OperatorName, negated: true };
  }
  return null;
}

/** The plan node of a filter whose operand is converted: the positive build, negated for a negative operator. */
export function buildNode(def: OperatorDef, target: Target, operand: Operand, now: number): Node {
  const positive = def.build(target, operand, now);
  return def.negated ? not(positive) : positive;
}

/** Operator names (aliases included) that fit a field kind, for error messages. */
export function operatorsFor(kind: FieldKind): string[] {
  const names = [...Object.keys(POSITIVE), ...Object.keys(NEGATIVE), ...Object.keys(ALIASES)];
  return names.filter((n) => operatorDef(n)!.fits.includes(kind));
}

const MAX_LIST = 1000;
const MAX_TEXT = 1000;
const MAX_WINDOW_MS = 100 * 366 * UNITS.days;
const MAX_COUNT = 1_000_000;

/** A short description of the filter for messages: `operator 'gt' on number field 'data.score'`. */
const describe = (f: Filter, kind: FieldKind) =>
  `Operator ${quote(f.operator)} on ${kind === 'activity' || kind === 'segment' ? '' : `${kind} `}field ${quote(f.field)}`;

function scalarFor(type: FieldType, v: unknown): Scalar | { from: number; to: number } | null {
  switch (type) {
    case 'string':
      if (typeof v === 'string') return v.length <= MAX_TEXT && !v.includes('\0') && v.isWellFormed() ? v : null;
      return typeof v === 'number' && Number.isFinite(v) ? String(v) : typeof v === 'boolean' ? String(v) : null;
    case 'number':
      return toNumber(v);
    case 'boolean':
      return toBoolean(v);
    case 'date':
      return filterDateInterval(v);
  }
}

const TYPE_NEEDS: Record<FieldType, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
  date: 'a date (YYYY-MM-DD or an ISO 8601 date-time)',
};

function unitOf(f: Filter, kind: FieldKind, place: Place, required: boolean): Unit | null {
  if (f.unit === undefined || f.unit === null) {
    if (!required) return null;
    throw conditionError(`${describe(f, kind)} needs a unit: ${Object.keys(UNITS).join(', ')}`, place);
  }
  if (typeof f.unit !== 'string' || !Object.hasOwn(UNITS, f.unit)) {
    throw conditionError(`${describe(f, kind)} has an invalid unit ${quote(f.unit)}: use ${Object.keys(UNITS).join(', ')}`, place);
  }
  return f.unit as Unit;
}

function amount(v: unknown, unit: Unit, what: string, place: Place): number {
  const n = toNumber(v);
  if (n === null || n < 0) throw conditionError(`${what} needs a non-negative number of ${unit}, got ${quote(v)}`, place);
  const ms = Math.round(n * UNITS[unit]);
  if (ms > MAX_WINDOW_MS) throw conditionError(`${what}: the window is longer than 100 years`, place);
  return ms;
}

/** A string value too long to compare is named as such, not as a value of the wrong type. */
function assertTextFits(v: unknown, where: string, place: Place): void {
  if (typeof v === 'string' && v.length > MAX_TEXT) {
    throw conditionError(`${where} is ${v.length.toLocaleString('en-US')} characters long; at most ${MAX_TEXT.toLocaleString('en-US')} are compared`, place);
  }
}

/**
 * Checks and converts a filter's value for a field of `kind` (and `type` for value fields); 400
 * naming the field, operator and what was expected.
 */
export function convertOperand(def: OperatorDef, f: Filter, kind: FieldKind, place: Place): Operand {
  const what = describe(f, kind);
  switch (def.shape) {
    case 'none':
      return { shape: 'none' };
    case 'scalar': {
      if (kind === 'activity' || kind === 'segment') throw new Error('operator table: scalar operand on a non-value field');
      if (kind === 'string') assertTextFits(f.value, `The value of ${what[0].toLowerCase()}${what.slice(1)}`, place);
      const converted = f.value === undefined || f.value === null ? null : scalarFor(kind, f.value);
      if (converted === null) throw conditionError(`${what} needs ${TYPE_NEEDS[kind]} value, got ${quote(f.value ?? null)}`, place);
      return typeof converted === 'object' ? { shape: 'instant', ...converted } : { shape: 'scalar', value: converted };
    }
    case 'list': {
      if (kind === 'activity' || kind === 'segment' || kind === 'date' || kind === 'boolean') {
        throw new Error('operator table: list operand on a field without list support');
      }
      if (!Array.isArray(f.value) || f.value.length === 0 || f.value.length > MAX_LIST) {
        throw conditionError(`${what} needs an array of 1 to ${MAX_LIST} values`, place);
      }
      if (kind === 'string') f.value.forEach((v: unknown, i: number) => assertTextFits(v, `value[${i}] of ${what[0].toLowerCase()}${what.slice(1)}`, place));
      const values = f.value.map((v) => (v === null ? null : scalarFor(kind, v)));
      const bad = values.findIndex((v) => v === null);
      if (bad >= 0) throw conditionError(`${what} needs ${TYPE_NEEDS[kind]} at value[${bad}], got ${quote(f.value[bad])}`, place);
      return { shape: 'list', values: values as Scalar[] };
    }
    case 'duration': {
      const unit = unitOf(f, kind, place, true)!;
      return { shape: 'duration', ms: amount(f.value, unit, what, place) };
    }
    case 'count': {
      const unit = unitOf(f, kind, place, false);
      const spec = typeof f.value === 'object' && f.value !== null && !Array.isArray(f.value) ? (f.value as Record<string, unknown>) : null;
      const count = toNumber(spec ? spec.count : f.value);
      if (count === null || !Number.isInteger(count) || count < 1 || count > MAX_COUNT) {
        throw conditionError(`${what} needs a whole count of 1 to ${MAX_COUNT} (value, or value.count), got ${quote(f.value ?? null)}`, place);
      }
      if (spec && spec.within !== undefined) {
        if (!unit) throw conditionError(`${what} with value.within needs a unit: ${Object.keys(UNITS).join(', ')}`, place);
        return { shape: 'count', atLeast: count, windowMs: amount(spec.within, unit, what, place) };
      }
      return { shape: 'count', atLeast: count, windowMs: unit ? UNITS[unit] : null };
    }
  }
}

/**
 * The error for a `data.*` filter whose field's type is not known yet (the condition's shape is
 * checked before the project's field types are read), when its one value is of no type the
 * operator fits: it names every such type. Naming the first one alone told a `date` field's
 * `gt "2026-02-30"` that it was a number field and needed a number. Null for other failures
 * (a missing value, an over-long string, a list or a count), which convertOperand names.
 */
export function noTypeReads(def: OperatorDef, f: Filter, place: Place): Error | null {
  if (def.shape !== 'scalar' || f.value === undefined || f.value === null || (typeof f.value === 'string' && f.value.length > MAX_TEXT)) return null;
  const fitting = (['number', 'date', 'string', 'boolean'] as const).filter((t) => def.fits.includes(t));
  if (fitting.length === 0) return null;
  return conditionError(
    `Operator ${quote(f.operator)} on field ${quote(f.field)} needs ${fitting.map((t) => TYPE_NEEDS[t]).join(' or ')}, got ${quote(f.value)}`,
    place,
  );
}

/**
 * The types an untyped `data.*` field may be read as for this filter, best first: guessed from
 * the operator and the value (a numeric string compared with `greaterThan` reads as a number).
 */
export function candidateTypes(def: OperatorDef, f: Filter): FieldType[] {
  const sample = Array.isArray(f.value) ? f.value[0] : f.value;
  let order: FieldType[];
  if (def.shape === 'duration') order = ['date'];
  else if (def.shape === 'none') order = ['string'];
  else if (typeof sample === 'boolean') order = ['boolean', 'string'];
  else if (typeof sample === 'number') order = ['number', 'string'];
  else order = ['string', 'number', 'date', 'boolean'];
  return order.filter((t) => def.fits.includes(t));
}
