/**
 * @herald/client: a typed client for Herald's API, generated from its OpenAPI document
 * (src/operations.ts) plus this thin `fetch` wrapper. No runtime dependency beyond `fetch`.
 *
 *   const herald = createHerald({ baseUrl: 'https://mail.example.com', apiKey: process.env.HERALD_KEY });
 *   await herald.emails.send({ to: 'ada@example.com', from: 'hello@mail.example.com', subject: 'Hi', body: '<p>Hello</p>' });
 *   const page = await herald.contacts.list({ limit: 50 });
 *   for await (const contact of herald.contacts.list.all({ limit: 100 })) console.log(contact.email);
 */
import { OPERATIONS, type Operations } from './operations.ts';

export type * from './operations.ts';
export { OPERATIONS } from './operations.ts';

export type OperationId = keyof Operations;

export type HeraldOptions = {
  /** Where Herald answers, e.g. `https://mail.example.com` (no trailing path). */
  baseUrl: string;
  /** A secret key (`sk_...`), or a public key (`pk_...`) for `events.track` only. */
  apiKey?: string;
  /** Extra headers on every request (e.g. `cookie` and `x-project-id` for a dashboard session). */
  headers?: Record<string, string>;
  /** Defaults to the global `fetch`. */
  fetch?: typeof fetch;
};

export type CallOptions = {
  /** Sent as `Idempotency-Key` (send and track): a retry with the same key is answered once. */
  idempotencyKey?: string;
  /** Query parameters of an operation that also takes a body. */
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

type FieldError = { field: string; message: string; code: string; received?: string };

/** Any non-2xx answer. `code`, `statusCode` and `requestId` come from Herald's error body. */
export class HeraldError extends Error {
  readonly code: string;
  readonly statusCode: number;
  readonly requestId: string | null;
  readonly details: Record<string, unknown> | undefined;
  readonly errors: FieldError[] | undefined;
  /** The parsed body as Herald sent it. */
  readonly body: unknown;

  constructor(statusCode: number, body: unknown, requestId: string | null) {
    const e = errorOf(body);
    super(e.message ?? `HTTP ${statusCode}`);
    this.name = 'HeraldError';
    this.statusCode = statusCode;
    this.code = e.code ?? (statusCode === 400 ? 'BAD_REQUEST' : `HTTP_${statusCode}`);
    this.requestId = e.requestId ?? requestId;
    this.details = e.details;
    this.errors = e.errors;
    this.body = body;
  }
}

type ErrorFields = { code?: string; message?: string; requestId?: string; details?: Record<string, unknown>; errors?: FieldError[] };

function errorOf(body: unknown): ErrorFields {
  if (typeof body !== 'object' || body === null) return {};
  const error = (body as { error?: unknown }).error;
  if (typeof error === 'string') return { message: error }; // the simple `{ error }` body
  if (typeof error === 'object' && error !== null) return error as ErrorFields;
  return {};
}

type Op<K extends OperationId> = Operations[K];
/** The one argument after the path arguments: the body, or the query when there is no body. */
type Input<K extends OperationId> = [Op<K>['body']] extends [never] ? ([Op<K>['query']] extends [never] ? never : Op<K>['query']) : Op<K>['body'];
type Args<K extends OperationId> = [Input<K>] extends [never]
  ? [...Op<K>['path'], options?: CallOptions]
  : [...Op<K>['path'], input?: Input<K>, options?: CallOptions];

type Item<R> = R extends { data: Array<infer T>; hasMore: boolean } ? T : never;

export type Method<K extends OperationId> = ((...args: Args<K>) => Promise<Op<K>['response']>) &
  ([Item<Op<K>['response']>] extends [never] ? unknown : { all: (...args: Args<K>) => AsyncGenerator<Item<Op<K>['response']>> });

type Resource<K extends string> = K extends `${infer R}.${string}` ? R : never;
type Verb<K extends string> = K extends `${string}.${infer V}` ? V : never;

/** `herald.<resource>.<verb>(...)` for every operationId `<resource>.<verb>`. */
export type Herald = {
  [R in Resource<OperationId>]: { [K in OperationId as Resource<K> extends R ? Verb<K> : never]: Method<K> };
} & {
  /** Any operation by id, e.g. `herald.call('contacts.get', id)`. */
  call: <K extends OperationId>(id: K, ...args: Args<K>) => Promise<Op<K>['response']>;
};

const MAX_PAGES = 100_000;

export function createHerald(options: HeraldOptions): Herald {
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;

  async function call(id: OperationId, args: unknown[]): Promise<unknown> {
    const spec = OPERATIONS[id];
    const names = [...spec.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    const pathArgs = args.slice(0, names.length);
    const input = args[names.length];
    const opts = (args[names.length + 1] ?? {}) as CallOptions;
    let i = 0;
    const path = spec.path.replace(/\{[^}]+\}/g, () => encodeURIComponent(String(pathArgs[i++])));
    const url = new URL(base + path);
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers, ...opts.headers };
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
    if (opts.idempotencyKey) headers['idempotency-key'] = opts.idempotencyKey;
    let body: string | FormData | undefined;
    const query = spec.body === 'none' ? (input as Record<string, unknown> | undefined) : opts.query;
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    if (spec.body === 'json' && input !== undefined) {
      body = JSON.stringify(input);
      headers['content-type'] = 'application/json';
    } else if (spec.body === 'multipart' && input !== undefined) {
      body = input as FormData;
    }
    const res = await doFetch(url, { method: spec.method, headers, body, signal: opts.signal });
    const text = await res.text();
    const isJson = (res.headers.get('content-type') ?? '').includes('json');
    const parsed: unknown = isJson && text ? JSON.parse(text) : text;
    if (!res.ok) throw new HeraldError(res.status, parsed, res.headers.get('x-request-id'));
    return res.status === 204 ? undefined : parsed;
  }

  async function* all(id: OperationId, args: unknown[]): AsyncGenerator<unknown> {
    const names = [...OPERATIONS[id].path.matchAll(/\{[^}]+\}/g)].length;
    const query = { ...((args[names] as Record<string, unknown> | undefined) ?? {}) };
    for (let page = 0; page < MAX_PAGES; page++) {
      const res = (await call(id, [...args.slice(0, names), query, args[names + 1]])) as { data: unknown[]; cursor?: string; hasMore: boolean };
      yield* res.data;
      if (!res.hasMore || !res.cursor) return;
      query.cursor = res.cursor;
    }
  }

  const herald: Record<string, unknown> = { call: (id: OperationId, ...args: unknown[]) => call(id, args) };
  for (const id of Object.keys(OPERATIONS) as OperationId[]) {
    const [resource, verb] = id.split('.');
    const fn = Object.assign((...args: unknown[]) => call(id, args), { all: (...args: unknown[]) => all(id, args) });
    ((herald[resource] ??= {}) as Record<string, unknown>)[verb] = fn;
  }
  return herald as Herald;
}
