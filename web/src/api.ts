/**
 * The dashboard's one door to the API: same-origin fetch with the session cookie, `X-Project-Id`
 * for project endpoints, JSON in and out, and the spec's error body turned into an ApiError.
 * (When the typed SDK from sdk/ exists, it replaces this module.)
 */

export type FieldError = { field: string; message: string; code: string };

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly errors: FieldError[];
  constructor(status: number, code: string, message: string, errors: FieldError[] = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.errors = errors;
  }
}

let projectId: string | null = null;
let onUnauthorized: (() => void) | null = null;

/** The project that project endpoints act on; the project layout sets it from the URL. */
export function setProject(id: string | null): void {
  projectId = id;
}

/** Called when a request answers 401 (session missing or expired). */
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

const USER_SCOPED = /^\/(auth|users|config)(\/|$)/;

type Query = Record<string, string | number | boolean | undefined | null>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

async function request<T>(method: string, path: string, body?: unknown, as: 'json' | 'text' = 'json'): Promise<T> {
  const headers: Record<string, string> = { accept: as === 'json' ? 'application/json' : '*/*' };
  const multipart = body instanceof FormData;
  if (body !== undefined && !multipart) headers['content-type'] = 'application/json';
  if (projectId && !USER_SCOPED.test(path)) headers['x-project-id'] = projectId;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : multipart ? body : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'NETWORK_ERROR', 'Could not reach the server. Check your connection and try again.');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  if (res.ok && as === 'text') return text as T;
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    if (res.status === 401 && !path.startsWith('/auth/')) onUnauthorized?.();
    throw toApiError(res.status, json);
  }
  return json as T;
}

function toApiError(status: number, json: unknown): ApiError {
  const body = (json ?? {}) as { error?: unknown };
  if (typeof body.error === 'string') {
    // The spec's simple 400 body: `{ error: "from is required" }`; point it at the field it names.
    const field = /^(\w+) (is|are) required$/.exec(body.error)?.[1];
    return new ApiError(status, 'BAD_REQUEST', body.error, field ? [{ field, message: body.error, code: 'required' }] : []);
  }
  if (body.error && typeof body.error === 'object') {
    const e = body.error as { code?: string; message?: string; errors?: FieldError[] };
    return new ApiError(status, e.code ?? 'ERROR', e.message ?? `Request failed (${status})`, e.errors ?? []);
  }
  return new ApiError(status, 'ERROR', `Request failed (${status})`);
}

export const api = {
  get: <T>(path: string, query?: Query) => request<T>('GET', withQuery(path, query)),
  post: <T>(path: string, body: unknown = {}) => request<T>('POST', path, body),
  put: <T>(path: string, body: unknown) => request<T>('PUT', path, body),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, body),
  delete: <T = void>(path: string, body?: unknown) => request<T>('DELETE', path, body),
  /** A multipart upload (the browser sets the boundary). */
  upload: <T>(path: string, form: FormData) => request<T>('POST', path, form),
  /** A non-JSON body as text (errors still come as ApiError). */
  text: (path: string) => request<string>('GET', path, undefined, 'text'),
};
