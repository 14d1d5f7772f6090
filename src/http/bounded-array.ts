import { z } from 'zod';

type MaxedArray = z.ZodArray<z.ZodTypeAny, 'many' | 'atleastone'>;

/**
 * `array` (a `z.array(item).max(n)`) with its length checked before its items. zod checks every
 * item even when the length is already over `max`, one issue per bad item: a 1 MB body of 500,000
 * ints held the event loop for seconds, and a union around the array overflowed the stack (a 500).
 * Over `max`, this reports the same too_big issue zod would (same message) and checks only the
 * first `max` items. The JSON schema is the array's (an input-side effect describes its inner schema).
 */
export function lengthFirst<A extends MaxedArray>(array: A): z.ZodEffects<A, z.output<A>, unknown> {
  const max = array._def.maxLength;
  if (!max) throw new Error('lengthFirst: the array needs a .max()');
  return z.preprocess((value, ctx) => {
    if (!Array.isArray(value) || value.length <= max.value) return value;
    ctx.addIssue({ code: z.ZodIssueCode.too_big, type: 'array', maximum: max.value, inclusive: true, exact: false, message: max.message });
    return value.slice(0, max.value);
  }, array);
}
