import type { z } from 'zod';
import { fieldErrors, validationError } from './errors.ts';

/** Parses input with a zod schema; failures become the spec's 422 VALIDATION_ERROR. */
export function parse<S extends z.ZodTypeAny>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationError(fieldErrors(result.error));
  return result.data;
}
