import { sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import type { SegmentType } from '../db/schema/segments.ts';
import { conditionError } from './errors.ts';
import { MAX_ACTIVITY_FILTERS, isActivityFilter, parseCondition } from './parse.ts';
import type { Condition, Filter } from './types.ts';

/** How many segments deep `segment.<id>` references may chain (A uses B uses C …). */
export const MAX_REFERENCE_DEPTH = 5;

/** Calls `fn` for every filter of the tree with its path (`groups[0].filters[1]`). */
export function forEachFilter(c: Condition, fn: (f: Filter, path: string) => void, prefix = ''): void {
  c.groups.forEach((g, gi) => {
    g.filters.forEach((f, fi) => fn(f, `${prefix}groups[${gi}].filters[${fi}]`));
    if (g.conditions) forEachFilter(g.conditions, fn, `${prefix}groups[${gi}].conditions.`);
  });
}

/** The `segment.<id>` filters of a tree: the referenced id (lower case) and where. */
export function segmentReferences(c: Condition): { segmentId: string; filter: Filter; path: string }[] {
  const found: { segmentId: string; filter: Filter; path: string }[] = [];
  forEachFilter(c, (filter, path) => {
    if (filter.field.startsWith('segment.')) found.push({ segmentId: filter.field.slice(8).toLowerCase(), filter, path });
  });
  return found;
}

export type ReferencedSegment = { id: string; name: string; type: SegmentType; condition: Condition | null };

/** The segments `roots` reference, transitively (a bounded number of levels), from this project only. */
export async function loadReferences(db: Db, projectId: string, roots: string[]): Promise<Map<string, ReferencedSegment>> {
  const found = new Map<string, ReferencedSegment>();
  let wanted = [...new Set(roots)];
  for (let level = 0; wanted.length > 0 && level <= MAX_REFERENCE_DEPTH + 1; level++) {
    const { rows } = await db.execute<{ id: string; name: string; type: SegmentType; condition: unknown }>(
      sql`SELECT id, name, type, condition FROM segments WHERE project_id = ${projectId} AND id = ANY(${sql.param(wanted)}::uuid[])`,
    );
    const next: string[] = [];
    for (const row of rows) {
      const condition = row.type === 'DYNAMIC' ? storedCondition(row.condition) : null;
      found.set(row.id, { id: row.id, name: row.name, type: row.type, condition });
      if (condition) next.push(...segmentReferences(condition).map((r) => r.segmentId));
    }
    wanted = [...new Set(next)].filter((id) => !found.has(id));
  }
  return found;
}

/** A stored condition passed validation when saved; one that no longer parses matches nobody. */
function storedCondition(raw: unknown): Condition | null {
  try {
    return parseCondition(raw);
  } catch {
    return null;
  }
}

/**
 * Every referenced segment exists in the project, none is the segment itself, no chain of
 * references comes back to it (or loops anywhere), and chains stay within MAX_REFERENCE_DEPTH.
 * Each segment's references are walked once: a segment whose chains were walked without a cycle
 * remembers how deep they go (`height`), so a segment reached again is only checked against that.
 */
export function checkReferences(c: Condition, refs: ReadonlyMap<string, ReferencedSegment>, selfId: string | undefined): void {
  const height = new Map<string, number>();
  for (const { segmentId, filter, path } of segmentReferences(c)) {
    const place = { path, field: filter.field, operator: filter.operator };
    if (segmentId === selfId) throw conditionError(`A segment cannot reference itself (field '${filter.field}' at ${path})`, place);
    if (!refs.has(segmentId)) {
      throw conditionError(`Segment ${segmentId} referenced by field '${filter.field}' at ${path} does not exist in this project`, place);
    }
    const tooDeep = () => conditionError(`Segment references are nested deeper than ${MAX_REFERENCE_DEPTH} levels (field '${filter.field}' at ${path})`, place);
    /** How many references deep the chains below `id` go (0: none); throws on a cycle or a chain too deep. */
    const walk = (id: string, chain: string[]): number => {
      if (id === selfId || chain.includes(id)) {
        const names = [...chain, id].map((x) => (x === selfId ? 'this segment' : `'${refs.get(x)?.name ?? x}'`));
        throw conditionError(`Segment references form a cycle: ${selfId ? 'this segment → ' : ''}${names.join(' → ')}`, place);
      }
      if (chain.length >= MAX_REFERENCE_DEPTH) throw tooDeep();
      const known = height.get(id);
      if (known !== undefined) {
        if (chain.length + known >= MAX_REFERENCE_DEPTH) throw tooDeep();
        return known;
      }
      let below = 0;
      const seg = refs.get(id);
      if (seg?.condition) for (const r of segmentReferences(seg.condition)) below = Math.max(below, 1 + walk(r.segmentId, [...chain, id]));
      height.set(id, below);
      return below;
    };
    walk(segmentId, []);
  }
}

/**
 * How many filters a condition may hold once its `segment.<id>` references are expanded: the SQL
 * compiler inlines a referenced DYNAMIC segment's condition at every reference, so without this
 * bound 500 filters per condition, chained 5 deep, would build 500^5 (decisions.md § 4).
 */
export const MAX_EXPANDED_FILTERS = 1000;

/** A condition's filters, and its `event.*`/`email.*` filters among them, counted through its references. */
export type ExpandedSize = { filters: number; activity: number };

/**
 * The filters of a condition counted through every reference: a reference to a DYNAMIC segment
 * counts as that segment's own expanded size, anything else as 1 filter (and 1 activity filter for
 * `event.*`/`email.*`). Each referenced segment is counted once (`memo`), so this is linear in the
 * segments and filters loaded. A reference back to a segment being counted (a stored cycle, which
 * compiling refuses anyway) counts as 1.
 */
export function expandedSize(c: Condition, refs: ReadonlyMap<string, ReferencedSegment>, memo: Map<string, ExpandedSize> = new Map()): ExpandedSize {
  const total = { filters: 0, activity: 0 };
  forEachFilter(c, (f) => {
    const size = f.field.startsWith('segment.') ? referenceSize(f.field.slice(8).toLowerCase(), refs, memo) : isActivityFilter(f) ? ACTIVITY : ONE;
    total.filters += size.filters;
    total.activity += size.activity;
  });
  return total;
}

const ONE: ExpandedSize = { filters: 1, activity: 0 };
const ACTIVITY: ExpandedSize = { filters: 1, activity: 1 };
const COUNTING: ExpandedSize = { filters: 1, activity: 0 };

function referenceSize(id: string, refs: ReadonlyMap<string, ReferencedSegment>, memo: Map<string, ExpandedSize>): ExpandedSize {
  const known = memo.get(id);
  if (known !== undefined) return known;
  const condition = refs.get(id)?.condition;
  if (!condition) return ONE;
  memo.set(id, COUNTING);
  const counted = expandedSize(condition, refs, memo);
  const size = { filters: Math.max(1, counted.filters), activity: counted.activity };
  memo.set(id, size);
  return size;
}

/** What a condition may hold once expanded, and how each bound is named in its 400. */
const BOUNDS = [
  { of: 'filters', max: MAX_EXPANDED_FILTERS, what: 'filters' },
  { of: 'activity', max: MAX_ACTIVITY_FILTERS, what: 'event.* and email.* filters' },
] as const;

/**
 * 400 when `c`, expanded through its references, holds more than MAX_EXPANDED_FILTERS filters or
 * more than MAX_ACTIVITY_FILTERS activity filters; the place is the reference that adds the most.
 */
export function checkExpandedSize(c: Condition, refs: ReadonlyMap<string, ReferencedSegment>, memo: Map<string, ExpandedSize> = new Map()): void {
  const total = expandedSize(c, refs, memo);
  for (const bound of BOUNDS) {
    if (total[bound.of] <= bound.max) continue;
    const weighed = segmentReferences(c).map((r) => ({ ...r, weight: referenceSize(r.segmentId, refs, memo)[bound.of] }));
    if (weighed.length === 0) throw conditionError(`Condition has ${total[bound.of]} ${bound.what}, more than ${bound.max}`, { path: 'condition' });
    const largest = weighed.reduce((a, b) => (b.weight > a.weight ? b : a));
    throw conditionError(
      `Condition expands to ${total[bound.of]} ${bound.what} through its segment references, more than ${bound.max}` +
        ` (field '${largest.filter.field}' at ${largest.path} alone expands to ${largest.weight})`,
      { path: largest.path, field: largest.filter.field, operator: largest.filter.operator },
    );
  }
}

/**
 * The DYNAMIC segments of the project that reference `segmentId`, directly or through others
 * (as many levels as a chain may have, and one more), nearest first. One query: the references
 * of the project's segments are listed once and followed upwards.
 */
export async function loadReferrers(db: Db, projectId: string, segmentId: string): Promise<string[]> {
  const { rows } = await db.execute<{ id: string }>(sql`
    WITH RECURSIVE edges AS MATERIALIZED (
      SELECT s.id::text AS referrer, substr(f.field #>> '{}', 9) AS referenced
        FROM segments AS s, jsonb_path_query(s.condition, 'strict $.**.field') AS f(field)
       WHERE s.project_id = ${projectId} AND s.type = 'DYNAMIC' AND s.condition IS NOT NULL
         AND jsonb_typeof(f.field) = 'string' AND (f.field #>> '{}') LIKE 'segment.%'
    ), up(id, level) AS (
      SELECT ${segmentId}::text, 0
      UNION
      SELECT e.referrer, up.level + 1 FROM up JOIN edges AS e ON e.referenced = up.id WHERE up.level <= ${MAX_REFERENCE_DEPTH}
    )
    SELECT id FROM up WHERE id <> ${segmentId}::text GROUP BY id ORDER BY min(level), id`);
  return rows.map((r) => r.id);
}

/**
 * Saving `condition` as segment `selfId` changes what every segment referencing it expands to:
 * 400 naming the first of `referrers` that would pass MAX_EXPANDED_FILTERS by this change. One
 * already past it (stored before the bound) does not block a change that does not make it larger.
 * `refs` holds the referrers, the segment and what they reference, as stored.
 */
export function checkReferrersWithinBound(
  selfId: string,
  condition: Condition,
  referrers: readonly string[],
  refs: ReadonlyMap<string, ReferencedSegment>,
): void {
  const stored = refs.get(selfId);
  if (!stored) return;
  const changed = new Map(refs).set(selfId, { ...stored, condition });
  const before = new Map<string, ExpandedSize>();
  const after = new Map<string, ExpandedSize>();
  for (const id of referrers) {
    const seg = refs.get(id);
    if (!seg?.condition) continue;
    const total = referenceSize(id, changed, after);
    const was = referenceSize(id, refs, before);
    for (const bound of BOUNDS) {
      if (total[bound.of] > bound.max && total[bound.of] > was[bound.of]) {
        throw conditionError(
          `Segment '${seg.name}' (${id}) references this segment and would expand to ${total[bound.of]} ${bound.what} through its segment references, more than ${bound.max}`,
          { path: 'condition' },
        );
      }
    }
  }
}
