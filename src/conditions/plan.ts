import { type Place, conditionError, quote } from './errors.ts';
import { COLUMNS, type FieldKind, type FieldRef, parseField } from './fields.ts';
import { type Node, and, or } from './ir.ts';
import { type OperatorDef, type Target, buildNode, candidateTypes, convertOperand, noTypeReads, operatorDef, operatorsFor } from './operators.ts';
import type { Condition, FieldType, Filter } from './types.ts';

/**
 * Turns a condition into plan nodes (ir.ts) through the operator table. `strict` (validation)
 * refuses a `data.*` filter that does not fit the field's project type; otherwise (compiling a
 * stored condition) such a filter is read with the type its operator and value imply, so a field
 * typed after the condition was saved never makes a stored segment fail.
 */
export type PlanOptions = { types: ReadonlyMap<string, FieldType>; now: number; strict: boolean };

export function planCondition(c: Condition, opts: PlanOptions, path = ''): Node {
  return (c.logic === 'AND' ? and : or)(
    c.groups.map((g, gi) => {
      const at = `${path}groups[${gi}]`;
      const parts = g.filters.map((f, fi) => planFilter(f, { path: `${at}.filters[${fi}]`, field: f.field, operator: f.operator }, opts));
      if (g.conditions) parts.push(planCondition(g.conditions, opts, `${at}.conditions.`));
      return and(parts);
    }),
  );
}

const kindName = (kind: FieldKind) => (kind === 'activity' ? 'event and email' : kind);

/** Operators that fit a kind; null: an untyped custom field, which takes any value operator. */
const choicesFor = (kind: FieldKind | null) =>
  kind ? operatorsFor(kind) : [...new Set((['string', 'number', 'boolean', 'date'] as const).flatMap((k) => operatorsFor(k)))];

export function unknownOperator(f: Filter, kind: FieldKind | null, place: Place): Error {
  return conditionError(`Unknown operator ${quote(f.operator)} on field ${quote(f.field)}: use one of ${choicesFor(kind).join(', ')}`, place);
}

function doesNotFit(f: Filter, kind: FieldKind | null, place: Place): Error {
  return conditionError(
    `Operator ${quote(f.operator)} does not apply to ${kind ? kindName(kind) : 'custom'} field ${quote(f.field)}: use one of ${choicesFor(kind).join(', ')}`,
    place,
  );
}

function targetOf(ref: FieldRef, type: FieldType | null): Target {
  switch (ref.kind) {
    case 'column':
      return { kind: 'value', access: { from: 'column', name: ref.name }, type: COLUMNS[ref.name].type, ci: ref.name === 'email' };
    case 'data':
      return { kind: 'value', access: { from: 'data', path: ref.path }, type: type!, ci: false };
    case 'event':
      return { kind: 'activity', source: { kind: 'event', name: ref.name } };
    case 'email':
      return { kind: 'activity', source: { kind: 'email', activity: ref.activity } };
    case 'segment':
      return { kind: 'segment', segmentId: ref.segmentId };
  }
}

export function planFilter(f: Filter, place: Place, opts: PlanOptions): Node {
  const ref = parseField(f.field, place);
  const declared = ref.kind === 'data' ? (opts.types.get(ref.key) ?? null) : null;
  const def = operatorDef(f.operator);
  if (!def) throw unknownOperator(f, ref.kind === 'data' ? declared : kindOf(ref), place);

  if (ref.kind !== 'data') {
    const kind = kindOf(ref);
    if (!def.fits.includes(kind)) throw doesNotFit(f, kind, place);
    return buildNode(def, targetOf(ref, null), convertOperand(def, f, kind, place), opts.now);
  }
  if (declared && (opts.strict || def.fits.includes(declared))) {
    if (!def.fits.includes(declared)) throw doesNotFit(f, declared, place);
    if (opts.strict) return buildNode(def, targetOf(ref, declared), convertOperand(def, f, declared, place), opts.now);
    const node = tryBuild(def, f, ref, declared, place, opts.now);
    if (node) return node;
  }
  for (const type of candidateTypes(def, f)) {
    const node = tryBuild(def, f, ref, type, place, opts.now);
    if (node) return node;
  }
  if (opts.strict) {
    const unread = noTypeReads(def, f, place);
    if (unread) throw unread;
    // Otherwise report against the type the operator expects first.
    const expected = candidateTypes(def, f)[0];
    if (!expected) throw doesNotFit(f, null, place);
    convertOperand(def, f, expected, place);
  }
  // A stored filter no type can read matches nothing (and its negative twin everything).
  return { node: 'const', value: def.negated };
}

function tryBuild(def: OperatorDef, f: Filter, ref: FieldRef, type: FieldType, place: Place, now: number): Node | null {
  try {
    return buildNode(def, targetOf(ref, type), convertOperand(def, f, type, place), now);
  } catch {
    return null;
  }
}

function kindOf(ref: FieldRef): FieldKind {
  switch (ref.kind) {
    case 'column':
      return COLUMNS[ref.name].type;
    case 'data':
      return 'string';
    case 'event':
    case 'email':
      return 'activity';
    case 'segment':
      return 'segment';
  }
}
