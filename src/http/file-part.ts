import type { MultipartFile } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { ApiError, validationError } from './errors.ts';

/**
 * Reads the multipart part `file` of an upload with `read` (`what` names it in the error, e.g.
 * "the CSV"), then the rest of the body: a second file part is a 413 (busboy's files limit,
 * thrown by the iterator as FST_FILES_LIMIT), so the caller stores nothing. Reading only the
 * first part had left a second one unread and its upload silently half done. A first file part
 * with another name is drained and is a 422 on field `file`.
 */
export async function readFilePart<T>(req: FastifyRequest, what: string, read: (part: MultipartFile) => Promise<T>): Promise<T> {
  const parts = req.parts()[Symbol.asyncIterator]();
  let next = await parts.next();
  while (!next.done && next.value.type !== 'file') next = await parts.next();
  const part = next.done ? undefined : (next.value as MultipartFile);
  if (part?.fieldname !== 'file') {
    part?.file.resume();
    throw validationError([{ field: 'file', message: `Required: send ${what} as multipart part "file"`, code: 'invalid_type', received: 'undefined' }]);
  }
  const result = await read(part);
  for (next = await parts.next(); !next.done; next = await parts.next()) {
    if (next.value.type === 'file') {
      next.value.file.resume();
      throw new ApiError(413, 'PAYLOAD_TOO_LARGE', 'Too many multipart parts: send one file part and at most 3 small fields');
    }
  }
  return result;
}
