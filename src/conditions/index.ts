import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { compileNode } from './compile.ts';
import { conditionError } from './errors.ts';
import { type ContactFacts, type EvalContact, evaluateNode } from './evaluate.ts';
import { planCondition } from './plan.ts';
import {
  MAX_REFERENCE_DEPTH,
  type ReferencedSegment,
  checkExpandedSize,
  checkReferences,
  checkReferrersWithinBound,
  loadReferences,
  loadReferrers,
  segmentReferences,
} from './references.ts';
import type { Condition, FieldType } from './types.ts';

/**
 * The condition engine (decisions.md § 4): validation, the SQL compiler and the in-memory
 * evaluator, all driven by one operator table (operators.ts) through one plan (ir.ts).
 */

export type { Condition, EmailActivity, FieldType, Filter, Group, Logic, Unit } from './types.ts';
export type { ContactFacts, EvalContact } from './evaluate.ts';
export { parseCondition } from './parse.ts';
export { MAX_EXPANDED_FILTERS, forEachFilter, segmentReferences } from './references.ts';

/**
 * Checks a parsed condition against the project: `data.*` operators and values against the
 * fields' types, `segment.<id>` references (they exist, no self-reference, no cycle) and what the
 * condition expands to through them (MAX_EXPANDED_FILTERS). With `selfSegmentId` (saving that
 * segment) the segments that reference it must stay within that bound too. 400 BAD_REQUEST
 * naming the place, field and operator.
 */
export async function validateCondition(
  db: Db,
  projectId: string,
  c: Condition,
  opts: { types: ReadonlyMap<string, FieldType>; selfSegmentId?: string },
): Promise<void> {
  planCondition(c, { types: opts.types, now: Date.now(), strict: true });
  const self = opts.selfSegmentId?.toLowerCase();
  const direct = segmentReferences(c).map((r) => r.segmentId);
  const referrers = self ? await loadReferrers(db, projectId, self) : [];
  if (direct.length === 0 && referrers.length === 0) return checkExpandedSize(c, new Map());
  const refs = await loadReferences(db, projectId, [...direct, ...referrers]);
  checkReferences(c, refs, self);
  checkExpandedSize(c, refs);
  if (self) checkReferrersWithinBound(self, c, referrers, refs);
}

type Env = { types: ReadonlyMap<string, FieldType>; refs: ReadonlyMap<string, ReferencedSegment>; now: number };

function compileWith(c: Condition, env: Env, visiting: string[]): SQL {
  const node = planCondition(c, { types: env.types, now: env.now, strict: false });
  return compileNode(node, { resolveMember: (id) => membershipOf(id, env, visiting) });
}

function membershipOf(id: string, env: Env, visiting: string[]): SQL {
  const seg = env.refs.get(id);
  if (!seg) return sql`false`; // deleted since the condition was saved
  if (seg.type === 'STATIC') {
    return sql`EXISTS (SELECT 1 FROM segment_members sm WHERE sm.segment_id = ${id}::uuid AND sm.contact_id = c.id)`;
  }
  if (visiting.includes(id) || visiting.length > MAX_REFERENCE_DEPTH) {
    throw conditionError(`Segment references form a cycle or are nested too deeply (segment ${id})`, { path: 'groups', field: `segment.${id}` });
  }
  return seg.condition ? compileWith(seg.condition, env, [...visiting, id]) : sql`false`;
}

/**
 * A SQL boolean expression over the `contacts` table aliased `c` (columns c.id, c.email, c.data,
 * c.subscribed, c.created_at, c.updated_at), for WHERE clauses. Never NULL. Field types are the
 * project's current ones; `now` anchors `within`/`olderThan`. `selfSegmentId` names the segment the
 * condition belongs to, so a reference cycle through it is caught. 400 (nothing built) when the
 * condition expands to more than MAX_EXPANDED_FILTERS filters through its references.
 */
export async function compileCondition(
  db: Db,
  projectId: string,
  c: Condition,
  opts: { types: ReadonlyMap<string, FieldType>; now: Date; selfSegmentId?: string },
): Promise<SQL> {
  const direct = segmentReferences(c).map((r) => r.segmentId);
  const refs = direct.length > 0 ? await loadReferences(db, projectId, direct) : new Map<string, ReferencedSegment>();
  checkExpandedSize(c, refs); // before inlining anything: a segment stored before the bound may pass it
  return compileWith(c, { types: opts.types, refs, now: opts.now.getTime() }, opts.selfSegmentId ? [opts.selfSegmentId.toLowerCase()] : []);
}

/**
 * The in-memory evaluator: whether `contact` (with its facts) satisfies `c`, with the project's
 * field types and `now`. Gives the same answer as `compileCondition` for the same data.
 */
export function evaluateCondition(
  c: Condition,
  contact: EvalContact,
  facts: ContactFacts,
  opts: { types: ReadonlyMap<string, FieldType>; now: Date },
): boolean {
  return evaluateNode(planCondition(c, { types: opts.types, now: opts.now.getTime(), strict: false }), contact, facts);
}

/** Whether one contact of the project satisfies `c` now (one SQL query). */
export async function contactMatches(
  db: Db,
  projectId: string,
  contactId: string,
  c: Condition,
  opts: { types: ReadonlyMap<string, FieldType>; now: Date },
): Promise<boolean> {
  const where = await compileCondition(db, projectId, c, opts);
  const { rows } = await db.execute<{ ok: boolean }>(
    sql`SELECT EXISTS (SELECT 1 FROM contacts AS c WHERE c.project_id = ${projectId} AND c.id = ${contactId} AND ${where}) AS ok`,
  );
  return rows[0].ok;
}
