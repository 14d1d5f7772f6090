/**
 * Turns Herald's OpenAPI document into `sdk/src/operations.ts`: one TypeScript type per component
 * schema, and for every operation its path arguments, input (body, or query when there is no
 * body), query and response types, plus the method and path table the client calls through.
 * Used by `npm run sdk:generate` (sdk/generate.ts) and by the freshness test (test/sdk.test.ts).
 *
 * Written here rather than with openapi-typescript: that tool needs the TypeScript 5 compiler API,
 * and this project builds with TypeScript 7.
 */

type Schema = {
  $ref?: string;
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  description?: string;
  format?: string;
};

type Parameter = { name: string; in: string; required?: boolean; schema?: Schema; description?: string };
type Media = { schema?: Schema };
type Operation = {
  operationId: string;
  summary?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media> }>;
  'x-undescribed'?: boolean;
};
export type OpenApiDocument = {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
};

/** Operations the client leaves out: the dashboard's HTML pages and routes not described yet. */
const skipped = (op: Operation) => op['x-undescribed'] === true || (op.tags ?? []).includes('Dashboard');

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (k: string) => (IDENT.test(k) ? k : JSON.stringify(k));
const pad = (n: number) => '  '.repeat(n);

/** Component names, except those that would shadow a global (`Error`). */
const RENAMED: Record<string, string> = { Error: 'ErrorBody' };

function refName(ref: string): string {
  const name = (ref.split('/').pop() ?? 'Unknown').replace(/[^A-Za-z0-9_]/g, '_');
  return RENAMED[name] ?? name;
}

function union(parts: string[]): string {
  const unique = [...new Set(parts)];
  return unique.length === 1 ? unique[0] : unique.map((p) => (p.includes('=>') ? `(${p})` : p)).join(' | ');
}

/** The TypeScript type of a JSON Schema (the subset zod-to-json-schema writes). */
export function tsType(s: Schema | undefined, depth = 0): string {
  if (!s || Object.keys(s).filter((k) => k !== 'description' && k !== 'format' && k !== 'default').length === 0) return 'unknown';
  if (s.$ref) return refName(s.$ref);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return union(s.enum.map((v) => JSON.stringify(v)));
  if (s.anyOf) return union(s.anyOf.map((x) => tsType(x, depth)));
  if (s.oneOf) return union(s.oneOf.map((x) => tsType(x, depth)));
  if (s.allOf) return s.allOf.map((x) => tsType(x, depth)).join(' & ');
  if (Array.isArray(s.type)) return union(s.type.map((t) => tsType({ ...s, type: t }, depth)));
  switch (s.type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      return `Array<${tsType(s.items, depth)}>`;
    default:
      return objectType(s, depth);
  }
}

function objectType(s: Schema, depth: number): string {
  const props = Object.entries(s.properties ?? {});
  const extra = typeof s.additionalProperties === 'object' ? tsType(s.additionalProperties, depth + 1) : null;
  if (props.length === 0) return `Record<string, ${extra ?? 'unknown'}>`;
  const required = new Set(s.required ?? []);
  const lines = props.map(([name, p]) => {
    const doc = p.description ? `${pad(depth + 1)}/** ${p.description.replace(/\*\//g, '*\\/')} */\n` : '';
    return `${doc}${pad(depth + 1)}${key(name)}${required.has(name) ? '' : '?'}: ${tsType(p, depth + 1)};`;
  });
  if (extra) lines.push(`${pad(depth + 1)}[key: string]: ${extra};`);
  return `{\n${lines.join('\n')}\n${pad(depth)}}`;
}

type Op = { id: string; method: string; path: string; op: Operation };

function operations(doc: OpenApiDocument): Op[] {
  const out: Op[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (!skipped(op)) out.push({ id: op.operationId, method: method.toUpperCase(), path, op });
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

function successResponse(op: Operation): string {
  const status = Object.keys(op.responses)
    .filter((s) => /^2\d\d$/.test(s))
    .sort()[0];
  if (!status) return 'void';
  const content = op.responses[status].content;
  if (!content) return 'void';
  const json = content['application/json'];
  if (json) return tsType(json.schema, 2);
  return 'string';
}

/** The generated module's source. Deterministic: the same document gives the same text. */
export function generateOperations(doc: OpenApiDocument): string {
  const out: string[] = ['// Generated by `npm run sdk:generate` from GET /openapi.json (sdk/codegen.ts). Do not edit.', '/* eslint-disable */', ''];
  for (const [name, schema] of Object.entries(doc.components?.schemas ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
    if (schema.description) out.push(`/** ${schema.description} */`);
    out.push(`export type ${refName(name)} = ${tsType(schema, 0)};`, '');
  }
  const ops = operations(doc);
  out.push('/** Every operation: path arguments (in URL order), query, JSON body and success response. */');
  out.push('export interface Operations {');
  for (const { id, op, method, path } of ops) {
    const params = op.parameters ?? [];
    const pathArgs = params.filter((p) => p.in === 'path').map((p) => `${key(p.name)}: string`);
    const query = params.filter((p) => p.in === 'query');
    const queryType = query.length
      ? `{\n${query.map((p) => `${pad(3)}${key(p.name)}${p.required ? '' : '?'}: ${tsType(p.schema, 3)};`).join('\n')}\n${pad(2)}}`
      : 'never';
    const content = op.requestBody?.content ?? {};
    const bodyType = content['application/json'] ? tsType(content['application/json'].schema, 2) : content['multipart/form-data'] ? 'FormData' : 'never';
    out.push(`  /** ${method} ${path}${op.summary ? `: ${op.summary.replace(/\*\//g, '*\\/')}` : ''} */`);
    out.push(`  ${JSON.stringify(id)}: {`);
    out.push(`    path: [${pathArgs.join(', ')}];`);
    out.push(`    query: ${queryType};`);
    out.push(`    body: ${bodyType};`);
    out.push(`    response: ${successResponse(op)};`);
    out.push('  };');
  }
  out.push('}', '');
  out.push('/** How to call each operation. */');
  out.push('export const OPERATIONS = {');
  for (const { id, method, path, op } of ops) {
    const idempotent = (op.parameters ?? []).some((p) => p.in === 'header' && p.name === 'Idempotency-Key');
    const body = op.requestBody ? (op.requestBody.content['multipart/form-data'] ? 'multipart' : 'json') : 'none';
    out.push(`  ${JSON.stringify(id)}: { method: '${method}', path: '${path}', body: '${body}', idempotent: ${idempotent} },`);
  }
  out.push('} as const;', '');
  return out.join('\n');
}
