/**
 * The dashboard's one door to the API: the typed client from sdk/ (`@herald/client`) over a same-origin
 * fetch that sends the session cookie, `X-Project-Id` for project endpoints, reports an ended session,
 * and turns a network failure into a HeraldError like any other.
 */
import { createHerald, HeraldError } from '@herald/client';

export { HeraldError };

export type FieldError = { field: string; message: string; code: string };

let projectId: string | null = null;
/**
 * What to do with a request that answered 401: `retry` it (the user logged in again as the same
 * account), `fail` it with SESSION_ENDED (never the API's "Missing API key", which speaks to API
 * clients), or `pass` the 401 on as it is (no session was ever seen on this page load).
 */
export type UnauthorizedOutcome = 'retry' | 'fail' | 'pass';

let onUnauthorized: (() => Promise<UnauthorizedOutcome>) | null = null;

/** The project that project endpoints act on; the project layout sets it from the URL. */
export function setProject(id: string | null): void {
  projectId = id;
}

/** Asked when a request answers 401 (session missing or expired); the request waits for its answer. */
export function setUnauthorizedHandler(fn: () => Promise<UnauthorizedOutcome>): void {
  onUnauthorized = fn;
}

export const SESSION_ENDED = 'SESSION_ENDED';

const USER_SCOPED = /^\/(auth|users|config)(\/|$)/;

async function dashboardFetch(input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> {
  const { pathname } = new URL(input instanceof Request ? input.url : input, window.location.origin);
  const headers = new Headers(init.headers);
  if (projectId && !USER_SCOPED.test(pathname)) headers.set('x-project-id', projectId);
  let res: Response;
  try {
    res = await fetch(input, { ...init, headers, credentials: 'same-origin' });
  } catch {
    const error = { code: 'NETWORK_ERROR', message: 'Could not reach the server. Check your connection and try again.' };
    throw new HeraldError(0, { error }, null);
  }
  if (res.status === 401 && !pathname.startsWith('/auth/') && onUnauthorized) {
    const outcome = await onUnauthorized();
    // The body is a string or FormData (never a stream), so the request can be sent again.
    if (outcome === 'retry') return dashboardFetch(input, init);
    if (outcome === 'fail') throw new HeraldError(401, { error: { code: SESSION_ENDED, message: 'Your session ended. Log in again.' } }, null);
  }
  return res;
}

export const herald = createHerald({ baseUrl: window.location.origin, fetch: dashboardFetch });

/** An API error with this HTTP status (any API error without one). */
export function isApiError(err: unknown, ...statuses: number[]): err is HeraldError {
  return err instanceof HeraldError && (statuses.length === 0 || statuses.includes(err.statusCode));
}

/**
 * The field errors of an API error: its `errors[]`, or the spec's simple 400 body
 * (`{ error: "from is required" }`) pointed at the field it names.
 */
export function fieldErrors(err: unknown): FieldError[] {
  if (!(err instanceof HeraldError)) return [];
  if (err.errors?.length) return err.errors;
  const simple = typeof err.body === 'object' && err.body !== null && 'error' in err.body && typeof err.body.error === 'string';
  const field = simple ? /^(\w+) (is|are) required$/.exec(err.message)?.[1] : undefined;
  return field ? [{ field, message: err.message, code: 'required' }] : [];
}

/** What the API suggests doing about an error (its `error.suggestion`), if anything. */
export function errorSuggestion(err: unknown): string | undefined {
  if (!(err instanceof HeraldError) || typeof err.body !== 'object' || err.body === null) return undefined;
  const error = (err.body as { error?: unknown }).error;
  const suggestion = typeof error === 'object' && error !== null ? (error as { suggestion?: unknown }).suggestion : undefined;
  return typeof suggestion === 'string' ? suggestion : undefined;
}
