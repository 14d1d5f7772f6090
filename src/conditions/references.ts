import { sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import type { SegmentType } from '../db/schema/segments.ts';
import { conditionError } from './errors.ts';
import { parseCondition } from './parse.ts';
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
 */
export function checkReferences(c: Condition, refs: ReadonlyMap<string, ReferencedSegment>, selfId: string | undefined): void {
  for (const { segmentId, filter, path } of segmentReferences(c)) {
    const place = { path, field: filter.field, operator: filter.operator };
    if (segmentId === selfId) throw conditionError(`A segment cannot reference itself (field '${filter.field}' at ${path})`, place);
    if (!refs.has(segmentId)) {
      throw conditionError(`Segment ${segmentId} referenced by field '${filter.field}' at ${path} does not exist in this project`, place);
    }
    const walk = (id: string, chain: string[]): void => {
      if (id === selfId || chain.includes(id)) {
        const names = [...chain, id].map((x) => (x === selfId ? 'this segment' : `'${refs.get(x)?.name ?? x}'`));
        throw conditionError(`Segment references form a cycle: ${selfId ? 'this segment → ' : ''}${names.join(' → ')}`, place);
      }
      if (chain.length >= MAX_REFERENCE_DEPTH) {
        throw conditionError(`Segment references are nested deeper than ${MAX_REFERENCE_DEPTH} levels (field '${filter.field}' at ${path})`, place);
      }
      const seg = refs.get(id);
      if (seg?.condition) for (const r of segmentReferences(seg.condition)) walk(r.segmentId, [...chain, id]);
    };
    walk(segmentId, []);
  }
}
