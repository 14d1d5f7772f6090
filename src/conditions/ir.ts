import type { ColumnName } from './fields.ts';
import type { EmailActivity, FieldType } from './types.ts';

/**
 * The planned form of a condition: what the operator table turns each filter into. Both back ends
 * (SQL compiler, in-memory evaluator) interpret exactly these nodes, so they agree by construction
 * on everything but the primitives, which the property test checks.
 *
 * Instants are epoch milliseconds; every interval is half-open `[from, to)` with ms-aligned
 * bounds, so values stored with microseconds compare as if truncated to milliseconds.
 */

/** Where a value comes from: a contacts column, or a path into `data` (through objects only). */
export type Access = { from: 'column'; name: ColumnName } | { from: 'data'; path: string[] };

export type Scalar = string | number | boolean;

/** A test on one typed value. A value of another JSON type than the field's fails every test but `present`. */
export type Test =
  /** Set and not null, whatever its type. */
  | { test: 'present' }
  /** Equal, as the field's type; `ci`: case-insensitive (values already folded). */
  | { test: 'equals'; value: Scalar; ci: boolean }
  | { test: 'compare'; op: '<' | '<=' | '>' | '>='; value: number }
  /** Case-insensitive; `value` already folded. */
  | { test: 'text'; mode: 'contains' | 'startsWith' | 'endsWith'; value: string }
  | { test: 'oneOf'; values: Scalar[]; ci: boolean }
  /** A date in `[from, to)`; `fullOnly`: a date-only `data` value (YYYY-MM-DD) does not count. */
  | { test: 'range'; from: number | null; to: number | null; fullOnly: boolean };

export type ActivitySource = { kind: 'event'; name: string } | { kind: 'email'; activity: EmailActivity };

export type Node =
  | { node: 'value'; access: Access; type: FieldType; test: Test }
  /** At least `atLeast` events (or emails with the activity) at instants in `[from, to)`. */
  | { node: 'activity'; source: ActivitySource; from: number | null; to: number | null; atLeast: number }
  | { node: 'member'; segmentId: string }
  | { node: 'and'; children: Node[] }
  | { node: 'or'; children: Node[] }
  | { node: 'not'; child: Node }
  | { node: 'const'; value: boolean };

export const and = (children: Node[]): Node => (children.length === 1 ? children[0] : { node: 'and', children });
export const or = (children: Node[]): Node => (children.length === 1 ? children[0] : { node: 'or', children });
export const not = (child: Node): Node => ({ node: 'not', child });
