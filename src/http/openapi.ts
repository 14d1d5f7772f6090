import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { z, type ZodTypeAny } from 'zod';
import { ignoreOverride, zodToJsonSchema } from 'zod-to-json-schema';
import { SESSION_COOKIE } from './sessions.ts';

/**
 * The OpenAPI 3.1 document, built from the zod schemas the routes validate with.
 *
 * A route describes itself with `schema: describe({...})` next to its handler. The handler still
 * validates with `parse(schema, input)` (so every error keeps the spec's 422 shape); Fastify's own
 * validator is turned off (`registerOpenApi`), and the schemas serve the document and the response
 * check: with `strictResponses` (on in tests) every JSON body a route answers is checked against the
 * schema declared for its status, and a body the schema rejects is a loud 500.
 */

/** Who may call a route: the security requirement the document shows. */
export type Access =
  | 'none' // public (health, config, signup, tracking links)
  | 'secretKey' // Authorization: Bearer sk_...
  | 'publicKey' // Authorization: Bearer pk_...
  | 'project' // a secret key, or a session cookie plus X-Project-Id
  | 'session'; // a session cookie

export type ResponseDoc = {
  /** The body; `null` for an empty body (204, redirects). */
  schema: ZodTypeAny | null;
  description?: string;
  /** Content type when not JSON (message/rfc822, text/csv, text/html...). */
  contentType?: string;
  example?: unknown;
};

export type RouteDoc = {
  /** The SDK's name for the call: `<resource>.<verb>`, e.g. `contacts.list`. */
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  params?: ZodTypeAny;
  query?: ZodTypeAny;
  body?: ZodTypeAny;
  /** `multipart` routes take a file upload (`file` part plus small fields); `form` routes take an HTML form (urlencoded). */
  bodyType?: 'json' | 'multipart' | 'form';
  bodyExample?: unknown;
  /** Success statuses; a bare schema is a JSON body. */
  responses: Record<number, ZodTypeAny | ResponseDoc | null>;
  /** Error statuses this route answers besides the ones every route of its access can answer. */
  errors?: number[];
  /** The route honours `Idempotency-Key` (send and track). */
  idempotent?: boolean;
  /**
   * A write answered even when the database's disk is below DATABASE_MIN_FREE_MB (http/disk-floor.ts):
   * it frees space or stops work, writes a few bytes that must not wait (a sign-in, an unsubscribe,
   * a relay's feedback), or only reads. Every other POST, PUT and PATCH is refused there with a 507,
   * and below twice the floor when its project wrote the most lately.
   */
  answeredWhenDiskFull?: true;
  /** A path parameter over the router's 1,000 characters is answered with the route's own 404 page, not the 414 (app.ts `routerErrors`). */
  longPathAnsweredAsPage?: true;
};

const DOC = Symbol.for('herald.openapi.doc');

export type DescribedSchema = FastifySchema & { [DOC]: RouteDoc };

// ---------------------------------------------------------------------------------------------
// Shared error bodies (src/http/errors.ts builds them)

export const fieldErrorSchema = z.object({
  field: z.string(),
  message: z.string(),
  code: z.string(),
  received: z.string().optional(),
});

const errorFields = {
  code: z.string().describe('Machine-readable error code, e.g. CONTACT_NOT_FOUND'),
  message: z.string(),
  statusCode: z.number().int(),
  requestId: z.string().describe('Also in the X-Request-ID response header'),
  errors: z.array(fieldErrorSchema).optional(),
  details: z.record(z.unknown()).optional(),
  suggestion: z.string().optional(),
};

export const errorBodySchema = z
  .object({ success: z.literal(false), error: z.object(errorFields), timestamp: z.string().datetime() })
  .describe('The error body every route answers with, except the few the spec gives the simple body.');

export const simpleErrorSchema = z.object({ error: z.string() }).describe('The simple 400 body the spec names for a few routes.');

export const validationErrorSchema = z
  .object({
    success: z.literal(false),
    error: z.object({ ...errorFields, code: z.literal('VALIDATION_ERROR'), errors: z.array(fieldErrorSchema) }),
    timestamp: z.string().datetime(),
  })
  .describe('422: one entry in `errors` per invalid field.');

export const rateLimitErrorSchema = z
  .object({
    success: z.literal(false),
    error: z.object({
      ...errorFields,
      code: z.literal('RATE_LIMIT_EXCEEDED'),
      details: z.object({ retryAfter: z.number().int(), limit: z.number().int().optional() }).passthrough(),
    }),
    timestamp: z.string().datetime(),
  })
  .describe('429: `details.retryAfter` seconds, also in the Retry-After header.');

/** 400 on the routes that answer the simple body for one case and the full error body for others. */
export const simpleOrErrorSchema = z.union([simpleErrorSchema, errorBodySchema]);

const COMPONENT = Symbol.for('herald.openapi.component');

/**
 * Names a schema (a resource such as Contact): where a route uses this very schema as a body, the
 * document shows a `$ref` to one entry under `components.schemas`. The name lives on the schema
 * object itself; the document collects the names it meets while walking the routes.
 */
export function component<S extends ZodTypeAny>(name: string, schema: S): S {
  // On the schema and on its definition (what zod-to-json-schema walks), not enumerable: a copy
  // made by `.extend()` or `.describe()` is another schema and must not inherit the name.
  const mark = { value: { name, schema }, enumerable: false };
  Object.defineProperty(schema, COMPONENT, mark);
  Object.defineProperty(schema._def, COMPONENT, mark);
  return schema;
}

type Mark = { name: string; schema: ZodTypeAny };
const markOf = (o: object): Mark | undefined => (o as { [COMPONENT]?: Mark })[COMPONENT];
const componentName = (schema: ZodTypeAny): string | undefined => markOf(schema)?.name;

component('Error', errorBodySchema);
component('SimpleError', simpleErrorSchema);
component('ValidationError', validationErrorSchema);
component('RateLimitError', rateLimitErrorSchema);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad request; a JSON body that does not parse (or is empty) is `INVALID_JSON`',
  401: 'Missing or invalid credentials',
  402: 'Plan limit reached',
  403: 'Not allowed for this key or role',
  404: 'Not found',
  405: 'Method not allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Payload too large (`PAYLOAD_TOO_LARGE`): the body is over the size limit (1 MB unless the operation says otherwise), or a JSON body has more than 100,000 keys and values or nests deeper than 256 levels',
  414: 'URI too long (`URI_TOO_LONG`): a path parameter is longer than 1,000 characters',
  415: 'Unsupported media type (`UNSUPPORTED_MEDIA_TYPE`): the body is not of a type the route takes (JSON unless it says otherwise)',
  422: 'Validation failed',
  429: 'Rate limit exceeded',
  500: 'Unexpected error',
  502: 'Upstream failure',
  503: 'Unavailable',
  507: 'Insufficient storage: the database disk is below its floor, or below twice it and this project wrote the most lately (then with Retry-After)',
};

function errorSchemaFor(status: number): ZodTypeAny {
  if (status === 422) return validationErrorSchema;
  if (status === 429) return rateLimitErrorSchema;
  return errorBodySchema;
}

/**
 * Statuses every route of an access kind can answer. A route that takes a body can be sent one too
 * large (413) or of a media type it does not take (415), and a JSON one JSON that does not parse
 * (400 `INVALID_JSON`): http/body-types.ts answers these before the handler, for every route alike.
 */
function defaultErrors(access: Access, hasInput: boolean, body: RouteDoc['bodyType'] | null): number[] {
  const out = [500];
  if (access !== 'none') out.push(401, 429);
  if (access === 'project') out.push(403);
  if (hasInput) out.push(422);
  if (body) out.push(413, 415);
  if (body === 'json') out.push(400);
  return out;
}

/** A route's `schema`: its input and response schemas plus what the document says about it. */
export function describe(doc: RouteDoc): DescribedSchema {
  const response: Record<number, ZodTypeAny> = {};
  for (const [status, r] of Object.entries(doc.responses)) {
    const schema = r === null ? null : r instanceof z.ZodType ? r : r.schema;
    if (schema && !(r !== null && !(r instanceof z.ZodType) && r.contentType)) response[Number(status)] = schema;
  }
  for (const status of allErrors(doc)) response[status] ??= errorSchemaFor(status);
  const schema: DescribedSchema = { [DOC]: doc, response };
  if (doc.params) schema.params = doc.params;
  if (doc.query) schema.querystring = doc.query;
  if (doc.body && doc.bodyType !== 'multipart') schema.body = doc.body;
  return schema;
}

/** `describe` with a module's tag and access filled in: `const doc = describer('Contacts', 'project')`. */
export const describer =
  (tag: string, access: Access) =>
  (d: Omit<RouteDoc, 'tag' | 'access'> & Partial<Pick<RouteDoc, 'access'>>): DescribedSchema =>
    describe({ tag, access, ...d });

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** Whether `method` on a route of `doc` is refused (507) while the database's disk is below its floor (http/disk-floor.ts). */
export const refusedWhenDiskFull = (method: string, doc: RouteDoc | null): boolean =>
  doc !== null && WRITE_METHODS.has(method) && doc.answeredWhenDiskFull !== true;

/**
 * The route's error statuses; with its method, the disk floor's 507 too; with its URL, the router's
 * 414 when a path parameter is over its maxParamLength (a wildcard has no such bound).
 */
function allErrors(doc: RouteDoc, method?: string, url?: string): number[] {
  const hasInput = Boolean(doc.params || doc.query || doc.body);
  const floor = method !== undefined && refusedWhenDiskFull(method, doc) ? [507] : [];
  const router = url !== undefined && /:[A-Za-z0-9_]/.test(url) && !doc.longPathAnsweredAsPage ? [414] : [];
  const body = doc.body ? (doc.bodyType ?? 'json') : null;
  return [...new Set([...defaultErrors(doc.access, hasInput, body), ...(doc.errors ?? []), ...floor, ...router])].sort((a, b) => a - b);
}

export function routeDocOf(schema: unknown): RouteDoc | null {
  return schema && typeof schema === 'object' && DOC in schema ? ((schema as DescribedSchema)[DOC] ?? null) : null;
}

// ---------------------------------------------------------------------------------------------
// Registration: Fastify's validator off, the response check, the route list, GET /openapi.json

export type RegisteredRoute = { method: string; url: string; doc: RouteDoc | null };

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered (HEAD excluded), in order: the document's source and the contract test's. */
    registeredRoutes: RegisteredRoute[];
  }
}

export class ResponseSchemaError extends Error {}

export function registerOpenApi(app: FastifyInstance, opts: { strictResponses: boolean; version: string }): void {
  const routes: RegisteredRoute[] = [];
  app.decorate('registeredRoutes', routes);
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === 'HEAD') continue;
      routes.push({ method, url: route.url, doc: routeDocOf(route.schema) });
    }
  });
  // Handlers validate with `parse` (the spec's 422 body); the schemas are for the document.
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(({ schema, method, url, httpStatus }) => {
    const zodSchema = schema instanceof z.ZodType ? schema : null;
    if (!opts.strictResponses || !zodSchema) return (data: unknown) => JSON.stringify(data);
    return (data: unknown) => {
      const json = JSON.stringify(data);
      const result = zodSchema.safeParse(JSON.parse(json));
      if (!result.success) {
        const issues = result.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
        const message = `Response of ${method} ${url} (${httpStatus}) does not match its schema: ${issues}`;
        console.error(message);
        throw new ResponseSchemaError(message);
      }
      return json;
    };
  });

  // Serialised once: 240 KB of JSON took about 4 ms of the event loop a request, for anyone (no key).
  let documentJson: string | null = null;
  app.get(
    '/openapi.json',
    {
      schema: describe({
        operationId: 'meta.openapi',
        summary: 'This OpenAPI 3.1 document',
        tag: 'Meta',
        access: 'none',
        responses: { 200: z.object({ openapi: z.string(), info: z.object({}).passthrough(), paths: z.record(z.unknown()) }).passthrough() },
      }),
    },
    async (_req, reply) => {
      documentJson ??= JSON.stringify(buildDocument(routes, opts.version));
      return reply.header('cache-control', 'no-cache').type('application/json; charset=utf-8').send(documentJson);
    },
  );
}

// ---------------------------------------------------------------------------------------------
// The document

type JsonSchema = Record<string, unknown>;
type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };

/** The JSON Schema of `schema`; a named one (see `component`) is a `$ref`, collected in `seen`. */
export function toJsonSchema(schema: ZodTypeAny, io: 'input' | 'output', seen?: Map<string, ZodTypeAny>): JsonSchema {
  const name = componentName(schema);
  if (name && seen) {
    seen.set(name, schema);
    return { $ref: `#/components/schemas/${name}` };
  }
  const json = zodToJsonSchema(schema, {
    target: 'jsonSchema2019-09',
    $refStrategy: 'none',
    effectStrategy: io === 'input' ? 'input' : 'any',
    pipeStrategy: io,
    removeAdditionalStrategy: 'strict',
    // A named schema inside this one (a Contact in a list) is a $ref too.
    override: (def) => {
      const mark = def === schema._def ? undefined : markOf(def);
      if (!mark || !seen) return ignoreOverride;
      seen.set(mark.name, mark.schema);
      return { $ref: `#/components/schemas/${mark.name}` } as never;
    },
  }) as JsonSchema;
  delete json.$schema;
  return json;
}

const header = (description: string, schema: JsonSchema = { type: 'string' }) => ({ description, schema });

/** Shared headers, each written once under `components.headers`. */
const HEADERS = {
  'X-Request-ID': header('The request id; also in every error body as `error.requestId`.'),
  'RateLimit-Limit': header('Requests allowed per minute for this key or user.', { type: 'integer' }),
  'RateLimit-Remaining': header('Requests left in the current window.', { type: 'integer' }),
  'RateLimit-Reset': header('Seconds until the window resets.', { type: 'integer' }),
  'Retry-After': header('Seconds to wait before retrying.', { type: 'integer' }),
};
const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });
const REQUEST_ID = headerRef('X-Request-ID');
const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': headerRef('RateLimit-Limit'),
  'RateLimit-Remaining': headerRef('RateLimit-Remaining'),
  'RateLimit-Reset': headerRef('RateLimit-Reset'),
};

/** An error status's response, written once under `components.responses` (`Error404`...). */
function errorResponse(status: number, seen: Map<string, ZodTypeAny>): Record<string, unknown> {
  const headers: Record<string, unknown> = { 'X-Request-ID': REQUEST_ID };
  if (status === 429 || status === 507) headers['Retry-After'] = headerRef('Retry-After');
  return {
    description: ERROR_DESCRIPTIONS[status] ?? 'Error',
    headers,
    content: { 'application/json': { schema: toJsonSchema(errorSchemaFor(status), 'output', seen) } },
  };
}

const TAG_DESCRIPTIONS: Record<string, string> = {
  Emails: 'Transactional sending (`POST /v1/send`) and the sent-email log.',
  Events: 'Event tracking (`POST /v1/track`) and the event log.',
  Contacts: 'Contacts and their custom data.',
  Meta: 'This document, health and public configuration.',
};

const SECURITY: Record<Access, Record<string, string[]>[]> = {
  none: [],
  secretKey: [{ secretKey: [] }],
  publicKey: [{ publicKey: [] }],
  project: [{ secretKey: [] }, { session: [] }],
  session: [{ session: [] }],
};

/** `/contacts/:id` → `/contacts/{id}`; a wildcard `*` → `{path}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{path}');
}

function fallbackOperationId(method: string, url: string): string {
  const words = url
    .split('/')
    .filter(Boolean)
    .map((s) => (s.startsWith(':') ? `by_${s.slice(1)}` : s === '*' ? 'path' : s.replace(/[^A-Za-z0-9]+/g, '_')));
  return `${method.toLowerCase()}_${words.join('_') || 'root'}`;
}

function objectParameters(schema: ZodTypeAny, where: 'path' | 'query'): unknown[] {
  const json = toJsonSchema(schema, 'input');
  const props = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, s]) => {
    const { description, ...rest } = s;
    const p: Record<string, unknown> = { name, in: where, required: where === 'path' || required.has(name), schema: rest };
    if (typeof description === 'string') p.description = description;
    return p;
  });
}

function pathParamNames(url: string): string[] {
  return [...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]).concat(url.endsWith('*') ? ['path'] : []);
}

function operationFor(route: RegisteredRoute, seen: Map<string, ZodTypeAny>): Record<string, unknown> {
  const doc = route.doc;
  const parameters: unknown[] = [];
  const documentedPath = new Set<string>();
  if (doc?.params) {
    for (const p of objectParameters(doc.params, 'path') as { name: string }[]) {
      documentedPath.add(p.name);
      parameters.push(p);
    }
  }
  for (const name of pathParamNames(route.url)) {
    if (!documentedPath.has(name)) parameters.push({ name, in: 'path', required: true, schema: { type: 'string' } });
  }
  if (doc?.query) parameters.push(...objectParameters(doc.query, 'query'));
  if (doc?.idempotent) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes a retry safe: while the key is held (IDEMPOTENCY_KEY_TTL_HOURS), a request with it is not performed and answers 409 IDEMPOTENCY_KEY_REUSED with the first answer in `details.originalResponse`. A 4xx releases the key for a corrected request.',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
  }
  if (doc?.access === 'project') {
    parameters.push({
      name: 'X-Project-Id',
      in: 'header',
      required: false,
      description: 'With a session cookie: the project to act on (required then; ignored with an API key).',
      schema: { type: 'string' },
    });
  }

  if (doc) parameters.push({ $ref: '#/components/parameters/X-Request-ID' });

  if (!doc) {
    return {
      operationId: fallbackOperationId(route.method, route.url),
      summary: `${route.method} ${route.url}`,
      tags: [tagOf(route.url)],
      'x-undescribed': true,
      ...(parameters.length ? { parameters } : {}),
      responses: { default: { description: 'Not described yet', headers: { 'X-Request-ID': REQUEST_ID } } },
    };
  }

  const limited = doc.access !== 'none';
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(doc.responses)) {
    const rd: ResponseDoc = r === null ? { schema: null } : r instanceof z.ZodType ? { schema: r } : r;
    const out: Record<string, unknown> = {
      description: rd.description ?? (Number(status) === 204 ? 'No content' : 'Success'),
      headers: { 'X-Request-ID': REQUEST_ID, ...(limited ? RATE_LIMIT_HEADERS : {}) },
    };
    if (rd.schema || rd.contentType) {
      const media: Record<string, unknown> = { schema: rd.schema ? toJsonSchema(rd.schema, 'output', seen) : { type: 'string' } };
      if (rd.example !== undefined) media.example = rd.example;
      out.content = { [rd.contentType ?? 'application/json']: media };
    }
    responses[status] = out;
  }
  for (const status of allErrors(doc, route.method, route.url)) {
    if (!(String(status) in responses)) responses[String(status)] = { $ref: `#/components/responses/Error${status}` };
  }
  const op: Record<string, unknown> = {
    operationId: doc.operationId,
    summary: doc.summary,
    tags: [doc.tag],
    security: SECURITY[doc.access],
  };
  if (doc.description) op.description = doc.description;
  if (parameters.length) op.parameters = parameters;
  if (doc.body) {
    const media: Record<string, unknown> = { schema: toJsonSchema(doc.body, 'input') };
    if (doc.bodyExample !== undefined) media.example = doc.bodyExample;
    op.requestBody = {
      required: true,
      content: {
        [doc.bodyType === 'multipart' ? 'multipart/form-data' : doc.bodyType === 'form' ? 'application/x-www-form-urlencoded' : 'application/json']: media,
      },
    };
  }
  op.responses = responses;
  return op;
}

function tagOf(url: string): string {
  const first = url.split('/').filter((s) => s && s !== 'v1')[0] ?? 'meta';
  return first[0].toUpperCase() + first.slice(1);
}

/** The document for the routes registered so far. Paths in registration order. */
export function buildDocument(routes: RegisteredRoute[], version: string): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const tags = new Set<string>();
  const seen = new Map<string, ZodTypeAny>([
    ['Error', errorBodySchema],
    ['SimpleError', simpleErrorSchema],
    ['ValidationError', validationErrorSchema],
    ['RateLimitError', rateLimitErrorSchema],
  ]);
  for (const route of routes) {
    if (route.url.startsWith('/app/') && !route.doc) continue; // the dashboard's built files (@fastify/static)
    const path = openApiPath(route.url);
    const op = operationFor(route, seen);
    for (const t of op.tags as string[]) tags.add(t);
    (paths[path] ??= {})[route.method.toLowerCase()] = op;
  }
  const schemas: Record<string, unknown> = {};
  for (const [name, schema] of [...seen].sort(([a], [b]) => a.localeCompare(b))) schemas[name] = toJsonSchema(schema, 'output');
  return {
    openapi: '3.1.0',
    info: {
      title: 'Herald API',
      version,
      description:
        'Self-hostable email platform. Public endpoints (`/v1/send`, `/v1/track`, `/v1/verify`) answer `{ success: true, data }`; dashboard endpoints answer the resource itself. Every response carries `X-Request-ID`.',
    },
    servers: [{ url: '/' }],
    tags: [...tags].sort().map((name) => (TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name })),
    paths,
    components: {
      schemas,
      responses: Object.fromEntries(Object.keys(ERROR_DESCRIPTIONS).map((status) => [`Error${status}`, errorResponse(Number(status), seen)])),
      headers: HEADERS,
      parameters: {
        'X-Request-ID': {
          name: 'X-Request-ID',
          in: 'header',
          required: false,
          description: 'Your own id for the request (1-128 of A-Z a-z 0-9 . _ : -), echoed in the response and the logs; otherwise Herald makes one.',
          schema: { type: 'string', maxLength: 128, pattern: '^[A-Za-z0-9._:-]{1,128}$' },
        },
      },
      securitySchemes: {
        secretKey: { type: 'http', scheme: 'bearer', description: 'A secret API key (`sk_...`): full access to its project.' },
        publicKey: { type: 'http', scheme: 'bearer', description: 'A public API key (`pk_...`): only `POST /v1/track`, safe in a browser.' },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description: 'The dashboard session cookie (from `POST /auth/login`); project routes also need `X-Project-Id`.',
        },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Response building blocks

/** A date-time as the API writes it (ISO 8601, UTC). */
export const isoTime = z.string().describe('ISO 8601 date-time');

/** A cursor list: `total` always (api-spec.md), `cursor` only when `hasMore`. */
export const cursorList = <T extends ZodTypeAny>(item: T) =>
  z.object({
    data: z.array(item),
    cursor: z.string().optional().describe('Pass as `?cursor=` for the next page; absent on the last page'),
    hasMore: z.boolean(),
    total: z.number().int().describe('Matching items, on the first page; 0 on later pages'),
  });

/** A page list (`?page=&pageSize=`). */
export const pageListOf = <T extends ZodTypeAny>(item: T) =>
  z.object({ data: z.array(item), total: z.number().int(), page: z.number().int(), pageSize: z.number().int(), totalPages: z.number().int() });

/** `{ success: true, data }`: the public endpoints' envelope. */
export const envelope = <T extends ZodTypeAny>(data: T) => z.object({ success: z.literal(true), data });
