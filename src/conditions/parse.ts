import { conditionError, quote } from './errors.ts';
import { planFilter } from './plan.ts';
import type { Condition, Filter, Group, Unit } from './types.ts';

/** Nesting (the root tree is level 1), size and list bounds: a tree is data from the outside. */
export const MAX_DEPTH = 10;
export const MAX_GROUPS = 100;
export const MAX_FILTERS = 500;
/**
 * `event.*` and `email.*` filters a condition may hold, counted through its segment references
 * (references.ts checks it when a condition is validated or compiled, not here: a condition
 * stored before the bound still parses, so a reference to it is refused rather than read as
 * matching nobody). Each is a subquery PostgreSQL joins, and planning grows faster than their
 * number (100 `triggeredOlderThan` filters: 2.2 s of planning; 250: 113 s).
 */
export const MAX_ACTIVITY_FILTERS = 20;

export const isActivityFilter = (f: Filter) => f.field.startsWith('event.') || f.field.startsWith('email.');

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const NO_TYPES = new Map();

/**
 * Checks the shape of a condition tree and every filter that can be checked without the project's
 * data (field names, operators, values, units; `data.*` values against what their operator can
 * take). Returns the tree with only the known keys. 400 BAD_REQUEST naming the place, field and
 * operator otherwise. `validateCondition` adds the project's field types and segment references.
 */
export function parseCondition(input: unknown): Condition {
  return parseTree(input, '', 1, { filters: 0 });
}

function parseTree(input: unknown, path: string, depth: number, seen: { filters: number }): Condition {
  const where = path === '' ? 'condition' : path.slice(0, -1);
  if (depth > MAX_DEPTH) throw conditionError(`Condition is nested deeper than ${MAX_DEPTH} levels (at ${where})`, { path: where });
  if (!isPlainObject(input)) throw conditionError(`${where} must be an object { logic, groups }`, { path: where });
  const logic = input.logic ?? 'AND';
  if (logic !== 'AND' && logic !== 'OR') {
    throw conditionError(`${where}.logic must be 'AND' or 'OR', got ${quote(logic)}`, { path: `${path}logic` });
  }
  const groups = input.groups;
  if (!Array.isArray(groups) || groups.length === 0) {
    throw conditionError(`${where}.groups must be a non-empty array of groups`, { path: `${path}groups` });
  }
  if (groups.length > MAX_GROUPS) throw conditionError(`${where}.groups has more than ${MAX_GROUPS} groups`, { path: `${path}groups` });
  return { logic, groups: groups.map((g, i) => parseGroup(g, `${path}groups[${i}]`, depth, seen)) };
}

function parseGroup(input: unknown, path: string, depth: number, seen: { filters: number }): Group {
  if (!isPlainObject(input)) throw conditionError(`${path} must be an object { filters, conditions? }`, { path });
  const rawFilters = input.filters ?? [];
  if (!Array.isArray(rawFilters)) throw conditionError(`${path}.filters must be an array`, { path: `${path}.filters` });
  const nested = input.conditions ?? undefined;
  if (rawFilters.length === 0 && nested === undefined) {
    throw conditionError(`${path} is empty: a group needs at least one filter or a nested condition`, { path });
  }
  seen.filters += rawFilters.length;
  if (seen.filters > MAX_FILTERS) throw conditionError(`Condition has more than ${MAX_FILTERS} filters`, { path });
  const filters = rawFilters.map((f, i) => parseFilter(f, `${path}.filters[${i}]`));
  const group: Group = { filters };
  if (nested !== undefined) group.conditions = parseTree(nested, `${path}.conditions.`, depth + 1, seen);
  return group;
}

function parseFilter(input: unknown, path: string): Filter {
  if (!isPlainObject(input)) throw conditionError(`${path} must be an object { field, operator, value?, unit? }`, { path });
  const { field, operator, value, unit } = input;
  if (typeof operator !== 'string' || operator === '') {
    throw conditionError(`Filter at ${path} needs an operator`, { path, field: typeof field === 'string' ? field : undefined });
  }
  // Segment ids are stored lower-case, so references are found by plain comparison (usage, delete).
  const name = typeof field === 'string' && field.startsWith('segment.') ? `segment.${field.slice(8).toLowerCase()}` : field;
  const filter: Filter = { field: name as string, operator };
  if (value !== undefined) filter.value = value;
  if (unit !== undefined) filter.unit = unit as Unit;
  planFilter(filter, { path, field: typeof field === 'string' ? field : undefined, operator }, { types: NO_TYPES, now: 0, strict: true });
  return filter;
}
