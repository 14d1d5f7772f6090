import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ZodError, type ZodIssue } from 'zod';
import { databaseErrorOf, loggableError } from '../loggable-error.ts';
import { invalidJson } from './body-types.ts';

export type FieldError = { field: string; message: string; code: string; received?: string };

/**
 * Field errors in one answer at most; past it the answer lists the first ones and says in
 * `details` that more were cut. A 1 MB body of bad array items had made a 56 MB answer.
 */
export const MAX_FIELD_ERRORS = 100;

/** The one error type services throw; the error handler shapes it into the spec's error body. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly errors: FieldError[] | undefined;
  readonly suggestion: string | undefined;

  constructor(
    statusCode: number,
    code: string,
    message: string,
    extra: { details?: Record<string, unknown>; errors?: FieldError[]; suggestion?: string } = {},
  ) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
    const cut = (extra.errors?.length ?? 0) > MAX_FIELD_ERRORS;
    this.errors = extra.errors?.slice(0, MAX_FIELD_ERRORS);
    this.details = cut ? { ...extra.details, errorsTruncated: true, maxErrors: MAX_FIELD_ERRORS } : extra.details;
    this.suggestion = extra.suggestion;
  }
}

/** The spec's simple `{ error: message }` 400 body, used only where the spec names it. */
export class SimpleError extends Error {
  readonly statusCode = 400;
}

export const notFound = (resource: string, id: string) =>
  new ApiError(404, `${resource.toUpperCase()}_NOT_FOUND`, `${capitalise(resource)} not found`, {
    details: { resource: resource.toLowerCase(), id },
  });

export const badRequest = (message: string, details?: Record<string, unknown>) => new ApiError(400, 'BAD_REQUEST', message, { details });

export const conflict = (message: string, details?: Record<string, unknown>) => new ApiError(409, 'CONFLICT', message, { details });

/** A count cap reached (projects per user, domains or pending invitations per project): 403 with `details.limit`. */
export const limitReached = (message: string, limit: number) => new ApiError(403, 'FORBIDDEN', message, { details: { limit } });

/** A count cap that frees itself (work under way ends): 429, with `details.retryAfter` (the Retry-After header) and `details.limit`. */
export const busyAtLimit = (reason: string, limit: number, retryAfter: number) =>
  new ApiError(429, 'RATE_LIMIT_EXCEEDED', `${reason}; try again in ${retryAfter} second${retryAfter === 1 ? '' : 's'}`, {
    details: { retryAfter, limit },
  });

export const forbidden = (message: string) => new ApiError(403, 'FORBIDDEN', message);

/** The 422 of a request that fails validation: its field errors, and what to do or what bounds it when known. */
export const validationError = (errors: FieldError[], extra: { details?: Record<string, unknown>; suggestion?: string } = {}) =>
  new ApiError(422, 'VALIDATION_ERROR', 'Request validation failed', { errors, ...extra });

function capitalise(s: string) {
  const words = s.toLowerCase().split('_');
  return words.map((w, i) => (i === 0 ? w[0].toUpperCase() + w.slice(1) : w)).join(' ');
}

/**
 * zod issues as the spec's field errors, with zod 3 codes and `received` for type errors. Stops
 * after MAX_FIELD_ERRORS + 1: the one past the cap is how ApiError knows more were cut.
 */
export function fieldErrors(err: ZodError, prefix: (string | number)[] = []): FieldError[] {
  const out: FieldError[] = [];
  collectFieldErrors(err.issues, prefix, out);
  return out;
}

function collectFieldErrors(issues: ZodIssue[], prefix: (string | number)[], out: FieldError[]): void {
  for (const issue of issues) {
    if (out.length > MAX_FIELD_ERRORS) return;
    const best = issue.code === 'invalid_union' ? furthestBranch(issue) : undefined;
    if (best) collectFieldErrors(best, prefix, out);
    else out.push(fieldErrorOf(issue, prefix));
  }
}

/** The union branch that got furthest, when it says more than an opaque "invalid input". */
function furthestBranch(issue: ZodIssue & { code: 'invalid_union' }): ZodIssue[] | undefined {
  if (issue.unionErrors.length === 0) return undefined;
  const best = issue.unionErrors.map((e) => e.issues).sort((a, b) => depth(b) - depth(a) || a.length - b.length)[0];
  return best.every((i) => i.code !== 'invalid_type' || i.path.length > issue.path.length) ? best : undefined;
}

function fieldErrorOf(issue: ZodIssue, prefix: (string | number)[]): FieldError {
  const out: FieldError = {
    field: [...prefix, ...issue.path].join('.'),
    message: issue.message,
    code: issue.code,
  };
  if (issue.code === 'invalid_type') out.received = String(issue.received);
  return out;
}

/** The longest issue path (a loop: spreading a long issue list into Math.max overflows the stack). */
function depth(issues: ZodIssue[]): number {
  let deepest = 0;
  for (const issue of issues) deepest = Math.max(deepest, issue.path.length);
  return deepest;
}

export type ErrorBody = {
  success: false;
  error: {
    code: string;
    message: string;
    statusCode: number;
    requestId: string;
    errors?: FieldError[];
    details?: Record<string, unknown>;
    suggestion?: string;
  };
  timestamp: string;
};

export function errorBody(req: FastifyRequest, err: ApiError): ErrorBody {
  const error: ErrorBody['error'] = {
    code: err.code,
    message: err.message,
    statusCode: err.statusCode,
    requestId: req.id,
  };
  if (err.errors) error.errors = err.errors;
  if (err.details) error.details = err.details;
  if (err.suggestion) error.suggestion = err.suggestion;
  return { success: false, error, timestamp: new Date().toISOString() };
}

/**
 * The multipart parser's (busboy's) errors for a body it cannot read, which it throws as plain
 * errors: a content type without a boundary, a body cut off, a part header it cannot parse. The
 * client's request is at fault; they were 500s.
 */
const MALFORMED_MULTIPART = /^(Multipart: Boundary not found|Unexpected end of form|Part terminated early|Malformed part header|Malformed content type)/;

/** Maps every thrown thing (ours, zod's, Fastify's) to one ApiError. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ZodError) return validationError(fieldErrors(err));
  const fe = err as Partial<FastifyError> & { code?: string };
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'INVALID_JSON', 'Request body is not valid JSON');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Type: send the body as JSON with content-type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(400, 'BAD_REQUEST', 'Content-Length does not match the body');
    case 'FST_PARTS_LIMIT':
    case 'FST_FILES_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Too many multipart parts: send the file and at most 3 small fields');
    case 'FST_PROTO_VIOLATION':
      return new ApiError(400, 'BAD_REQUEST', 'A multipart field name is not allowed');
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Uploaded file is too large');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError(414, 'URI_TOO_LONG', 'A path segment of the URL is too long');
    case 'FST_ERR_BAD_URL':
      return new ApiError(400, 'BAD_REQUEST', 'The URL is not valid');
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return new ApiError(400, 'BAD_REQUEST', 'Request must be multipart/form-data');
  }
  if (err instanceof Error && MALFORMED_MULTIPART.test(err.message)) {
    return new ApiError(400, 'BAD_REQUEST', `The multipart body is malformed: ${err.message}`);
  }
  const sqlState = databaseErrorOf(err)?.code;
  if (typeof sqlState === 'string' && sqlState.startsWith('22')) {
    // A data exception (SQLSTATE class 22): a value from the request PostgreSQL cannot take
    // (NUL in text, a date or number out of range). The request is at fault, not the server.
    return new ApiError(400, 'BAD_REQUEST', 'A value in the request cannot be stored or compared (out of range, or contains a NUL character)');
  }
  if (err instanceof SyntaxError && /JSON/.test(err.message)) return invalidJson(err);
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ApiError(fe.statusCode, 'BAD_REQUEST', fe.message ?? 'Bad request');
  }
  return new ApiError(500, 'INTERNAL_SERVER_ERROR', 'An unexpected error occurred');
}

/** Fastify's own router errors (bad URL, over-long parameter), answered before any route runs. */
export function frameworkErrors(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const apiError = toApiError(err);
  void reply.status(apiError.statusCode).header('x-request-id', req.id).send(errorBody(req, apiError));
}

/** `allowedMethods(path)`: the methods routed for a path, for 405 instead of 404 on a known path. */
export function registerErrorHandling(app: FastifyInstance, allowedMethods: (path: string) => string[] = () => []): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof SimpleError) return reply.status(400).send({ error: err.message });
    const apiError = toApiError(err);
    // A 507 is the disk floor refusing a write as it should (http/disk-floor.ts logs its crossing once), not a failure.
    if (apiError.statusCode >= 500 && apiError.statusCode !== 507) req.log.error({ error: loggableError(err), requestId: req.id }, 'request failed');
    if ((apiError.statusCode === 429 || apiError.statusCode === 507) && apiError.details?.retryAfter !== undefined) {
      reply.header('retry-after', String(apiError.details.retryAfter));
    }
    return reply.status(apiError.statusCode).send(errorBody(req, apiError));
  });
  app.setNotFoundHandler((req, reply) => {
    const allow = allowedMethods(req.url.split('?')[0]);
    if (allow.length > 0 && !allow.includes(req.method)) {
      const path = req.url.split('?')[0];
      const err = new ApiError(405, 'METHOD_NOT_ALLOWED', `Method ${req.method} is not allowed on ${path}; use ${allow.join(', ')}`, {
        details: { method: req.method, allow },
      });
      return reply.status(405).header('allow', allow.join(', ')).send(errorBody(req, err));
    }
    const err = new ApiError(404, 'RESOURCE_NOT_FOUND', `Route ${req.method} ${req.url.split('?')[0]} not found`, {
      details: { resource: 'route', id: `${req.method} ${req.url.split('?')[0]}` },
    });
    return reply.status(404).send(errorBody(req, err));
  });
}
