import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import sjson from 'secure-json-parse';
import { ApiError } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Media types this route takes besides JSON (e.g. multipart/form-data). Every other route takes JSON only. */
    accepts?: string[];
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;

/** The media type of a request, lower-cased, without parameters; null when it has no body. */
function mediaType(req: FastifyRequest): string | null {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (!hasBody) return null;
  return (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

export const unsupportedMediaType = (type: string) =>
  new ApiError(
    415,
    'UNSUPPORTED_MEDIA_TYPE',
    `Content-Type ${type === '' ? '(none)' : type} is not accepted here: send the body as JSON with content-type: application/json`,
    {
      details: { contentType: type },
      suggestion: "curl sends -d as application/x-www-form-urlencoded; add -H 'content-type: application/json'",
    },
  );

/** The spec's INVALID_JSON error, saying where the JSON broke when the parser told us. */
export function invalidJson(err: unknown): ApiError {
  const text = err instanceof Error ? err.message : '';
  const at = /at position (\d+)(?: \(line (\d+) column (\d+)\))?/.exec(text);
  if (!at) {
    const where = /end of (?:JSON|data)/i.test(text) ? ': it ends too early' : '';
    return new ApiError(400, 'INVALID_JSON', `Request body is not valid JSON${where}`);
  }
  const position = Number(at[1]);
  const line = at[2] ? Number(at[2]) : undefined;
  const column = at[3] ? Number(at[3]) : undefined;
  const what = text
    .slice(0, at.index)
    .trim()
    .replace(/ in JSON$/, '');
  const place = line !== undefined ? `line ${line}, column ${column}` : `position ${position}`;
  return new ApiError(400, 'INVALID_JSON', `Request body is not valid JSON at ${place}: ${what}`, {
    details: { position, ...(line !== undefined ? { line, column } : {}) },
  });
}

/**
 * JSON routes take JSON only: a body of another type (curl's default form encoding, text/plain)
 * is 415 rather than a confusing validation error. Malformed JSON says where it broke.
 */
export function registerBodyTypes(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    if (body === '') return done(new ApiError(400, 'INVALID_JSON', 'Request body is empty: send a JSON object'), undefined);
    try {
      done(null, sjson.parse(body as string, { protoAction: 'error', constructorAction: 'error' }));
    } catch (err) {
      done(invalidJson(err), undefined);
    }
  });
  app.addHook('preParsing', async (req: FastifyRequest, _reply: FastifyReply, payload) => {
    const type = mediaType(req);
    if (type === null || JSON_TYPE.test(type)) return payload;
    if (req.routeOptions.config?.accepts?.includes(type)) return payload;
    if (req.routeOptions.url === undefined) return payload; // no route: the 404/405 handler answers
    throw unsupportedMediaType(type);
  });
}
