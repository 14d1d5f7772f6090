import { type SQL, sql } from 'drizzle-orm';
import { textPattern } from '../db/like.ts';
import { COLUMNS } from './fields.ts';
import type { Access, ActivitySource, Node, Scalar, Test } from './ir.ts';

/**
 * The SQL back end: a plan node as a boolean over `contacts AS c`. Every expression is TRUE or
 * FALSE, never NULL, so NOT is an exact complement (a missing value matches only the negative
 * operators). User text only ever travels as bound parameters: a field name like
 * `data.a'; drop table contacts;--` is one JSON key.
 *
 * `member` nodes are resolved by the caller (`resolveMember`), which knows the referenced segments.
 */
export type CompileContext = { resolveMember: (segmentId: string) => SQL };

export function compileNode(n: Node, ctx: CompileContext): SQL {
  switch (n.node) {
    case 'const':
      return n.value ? sql`true` : sql`false`;
    case 'and':
    case 'or':
      if (n.children.length === 0) return n.node === 'and' ? sql`true` : sql`false`;
      return sql`(${sql.join(
        n.children.map((c) => compileNode(c, ctx)),
        n.node === 'and' ? sql` AND ` : sql` OR `,
      )})`;
    case 'not':
      return sql`(NOT ${compileNode(n.child, ctx)})`;
    case 'member':
      return ctx.resolveMember(n.segmentId);
    case 'activity':
      return activitySql(n.source, n.from, n.to, n.atLeast);
    case 'value':
      return n.access.from === 'column' ? columnTest(n.access.name, n.test) : dataTest(n.access, n.test);
  }
}

// Bounds past year 9999 (a day filter on 9999-12-31) are beyond every stored instant.
const END_OF_TIME = Date.UTC(10000, 0, 1);
const ts = (ms: number) => (ms >= END_OF_TIME ? sql`'infinity'::timestamptz` : sql`${new Date(ms).toISOString()}::timestamptz`);

/** `[from, to)` on a timestamptz expression; both bounds are ms-aligned, so microseconds compare as truncated. */
function between(column: SQL, from: number | null, to: number | null): SQL {
  const parts: SQL[] = [];
  if (from !== null) parts.push(sql`${column} >= ${ts(from)}`);
  if (to !== null) parts.push(sql`${column} < ${ts(to)}`);
  return parts.length === 0 ? sql`true` : sql`(${sql.join(parts, sql` AND `)})`;
}

/**
 * contains / startsWith / endsWith on already lower-cased text; `needle` is folded by the caller.
 * A LIKE pattern of the literal needle: on the email, the trigram index on lower(email) serves it
 * (db/search-index.ts).
 */
const textSql = (lowered: SQL, mode: 'contains' | 'startsWith' | 'endsWith', needle: string): SQL => sql`(${lowered} LIKE ${textPattern(mode, needle)}::text)`;

/** Standard fields are NOT NULL columns, so `present` always holds. */
function columnTest(name: keyof typeof COLUMNS, t: Test): SQL {
  const column = sql.raw(`c.${COLUMNS[name].column}`);
  const value = name === 'email' ? sql`lower(${column})` : column;
  switch (t.test) {
    case 'present':
      return sql`true`;
    case 'equals':
      return typeof t.value === 'boolean' ? sql`(${column} = ${t.value}::boolean)` : sql`(${value} = ${String(t.value)}::text)`;
    case 'oneOf':
      return sql`(${value} = ANY(${sql.param(t.values.map(String))}::text[]))`;
    case 'text':
      return textSql(value, t.mode, t.value);
    case 'range':
      return between(column, t.from, t.to);
    case 'compare':
      return sql`false`; // no numeric standard field
  }
}

// Dates in data: YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fraction]Z naming a real day (values.ts
// storedDateInstant); year ≥ 100 and the day of the month checked after the pattern matched.
const DATE_PATTERN = String.raw`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])(T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?Z)?$`;
const FULL_DATE_PATTERN = String.raw`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?Z$`;

function dateRange(v: SQL, from: number | null, to: number | null, fullOnly: boolean): SQL {
  const t = sql`(${v} #>> '{}')`;
  const y = sql`substr(${t}, 1, 4)::int`;
  const m = sql`substr(${t}, 6, 2)::int`;
  const d = sql`substr(${t}, 9, 2)::int`;
  const lastDay = sql`CASE WHEN ${m} = 2 THEN CASE WHEN (${y} % 4 = 0 AND ${y} % 100 <> 0) OR ${y} % 400 = 0 THEN 29 ELSE 28 END
    WHEN ${m} IN (4, 6, 9, 11) THEN 30 ELSE 31 END`;
  // Keep three fraction digits: the instant truncated to milliseconds, as in JavaScript.
  const instant = sql`(CASE WHEN length(${t}) = 10 THEN ${t} || 'T00:00:00Z'
    ELSE regexp_replace(${t}, ${String.raw`(\.[0-9]{3})[0-9]+Z$`}::text, ${String.raw`\1Z`}::text) END)::timestamptz`;
  const pattern = fullOnly ? FULL_DATE_PATTERN : DATE_PATTERN;
  return sql`(CASE WHEN ${v} IS NOT NULL AND jsonb_typeof(${v}) = 'string' AND ${t} ~ ${pattern}::text
    THEN CASE WHEN ${y} >= 100 AND ${d} <= ${lastDay} THEN ${between(instant, from, to)} ELSE false END
    ELSE false END)`;
}

/** `{ "a": { "b": value } }` for path [a, b]: containment of it is equality at that path, through objects only. */
function containing(path: string[], value: Scalar): string {
  let doc: unknown = value;
  for (const key of [...path].reverse()) doc = Object.fromEntries([[key, doc]]);
  return JSON.stringify(doc);
}

/** A strict-mode SQL/JSON path to the value (`strict $."a"."b"`): no array unwrapping, a missing key is no match. */
const jsonPath = (path: string[]) => `strict $${path.map((k) => `.${JSON.stringify(k)}`).join('')}`;

/**
 * A `data` value. Equality is containment (`c.data @> '{"a":{"b":"x"}}'`: exact, typed, objects
 * only, and a GIN index on data can serve it); numeric comparisons are SQL/JSON path predicates,
 * which only hold for JSON numbers. Both are also cheaper per row than extracting and casting.
 * Elsewhere `c.data -> 'a' -> 'b'` descends objects only (`->` with text on an array is NULL).
 */
function dataTest(access: Extract<Access, { from: 'data' }>, t: Test): SQL {
  const v = sql`(c.data${sql.join(access.path.map((k) => sql` -> ${k}::text`))})`;
  switch (t.test) {
    case 'present':
      return sql`COALESCE(jsonb_typeof(${v}) <> 'null', false)`;
    case 'equals':
      return sql`(c.data @> ${containing(access.path, t.value)}::jsonb)`;
    case 'oneOf':
      return sql`(c.data @> ANY(${sql.param(t.values.map((x) => containing(access.path, x)))}::jsonb[]))`;
    case 'compare':
      return sql`COALESCE(jsonb_path_match(c.data, ${`${jsonPath(access.path)} ${t.op} $v`}::jsonpath, ${JSON.stringify({ v: t.value })}::jsonb, true), false)`;
    case 'text':
      return sql`COALESCE(jsonb_typeof(${v}) = 'string' AND ${textSql(sql`lower(${v} #>> '{}')`, t.mode, t.value)}, false)`;
    case 'range':
      return dateRange(v, t.from, t.to, t.fullOnly);
  }
}

const EMAIL_COLUMNS = {
  sent: 'sent_at',
  delivered: 'delivered_at',
  opened: 'opened_at',
  clicked: 'clicked_at',
  bounced: 'bounced_at',
  complained: 'complained_at',
} as const;

/** At least `atLeast` of the contact's events (or emails with the activity) in `[from, to)`. */
function activitySql(source: ActivitySource, from: number | null, to: number | null, atLeast: number): SQL {
  let rows: SQL;
  if (source.kind === 'event') {
    rows = sql`SELECT 1 FROM events e WHERE e.contact_id = c.id AND e.name = ${source.name}::text AND ${between(sql`e.created_at`, from, to)}`;
  } else {
    const at = sql.raw(`m.${EMAIL_COLUMNS[source.activity]}`);
    rows = sql`SELECT 1 FROM emails m WHERE m.contact_id = c.id AND ${at} IS NOT NULL AND ${between(at, from, to)}`;
  }
  if (atLeast <= 1) return sql`EXISTS (${rows})`;
  return sql`((SELECT count(*) FROM (${rows} LIMIT ${atLeast}::int) AS n) >= ${atLeast}::int)`;
}
