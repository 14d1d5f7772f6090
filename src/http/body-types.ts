import { pipeline } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import sjson from 'secure-json-parse';
import { ApiError } from './errors.ts';
import { COUNT_WHOLE_BELOW, assertJsonShape, countingJsonShape } from './json-shape.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Media types this route takes besides JSON (e.g. multipart/form-data). Every other route takes JSON only. */
    accepts?: string[];
  }
  interface FastifyRequest {
    /** The JSON body's size in bytes, as received (the disk floor counts a project's recent writes by it: disk-floor.ts). */
    bodyBytes?: number;
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;

/** Small bodies (most requests) are counted whole before parsing; others as they arrive (json-shape.ts). */
function countedWhole(req: FastifyRequest): boolean {
  const length = Number(req.headers['content-length']);
  return length >= 0 && length <= COUNT_WHOLE_BELOW;
}

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
 * is 415 rather than a confusing validation error. Malformed JSON says where it broke. A body of
 * too many keys and values, or nested too deep, is 413 before JSON.parse sees it.
 */
export function registerBodyTypes(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    if (body.length === 0) return done(new ApiError(400, 'INVALID_JSON', 'Request body is empty: send a JSON object'), undefined);
    req.bodyBytes = body.length;
    try {
      if (countedWhole(req)) assertJsonShape(body);
    } catch (err) {
      return done(err as ApiError, undefined);
    }
    try {
      done(null, sjson.parse(body.toString('utf8'), { protoAction: 'error', constructorAction: 'error' }));
    } catch (err) {
      done(invalidJson(err), undefined);
    }
  });
  app.addHook('preParsing', async (req: FastifyRequest, _reply: FastifyReply, payload) => {
    const type = mediaType(req);
    if (type === null) return payload;
    if (JSON_TYPE.test(type)) return countedWhole(req) ? payload : pipeline(payload, countingJsonShape(), () => {});
    if (req.routeOptions.config?.accepts?.includes(type)) return payload;
    if (req.routeOptions.url === undefined) return payload; // no route: the 404/405 handler answers
    throw unsupportedMediaType(type);
  });
}
