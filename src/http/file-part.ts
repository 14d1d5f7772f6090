import type { MultipartFile } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { validationError } from './errors.ts';

/**
 * The multipart part `file` of an upload (`what` names it in the error, e.g. "the CSV"), or a 422
 * on field `file`. A first part with another name is drained so the client can read the answer.
 */
export async function filePart(req: FastifyRequest, what: string): Promise<MultipartFile> {
  const part = await req.file();
  if (part?.fieldname === 'file') return part;
  part?.file.resume();
  throw validationError([{ field: 'file', message: `Required: send ${what} as multipart part "file"`, code: 'invalid_type', received: 'undefined' }]);
}
