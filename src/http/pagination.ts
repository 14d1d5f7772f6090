import { z } from 'zod';

/** `?limit=` of cursor lists: default 20, at least 1, values above 100 clamped to 100. */
export const limitParam = z.coerce
  .number({ invalid_type_error: 'limit must be a number' })
  .int()
  .min(1)
  .default(20)
  .transform((n) => Math.min(n, 100));

/** `?page=&pageSize=` of page lists: page ≥ 1, pageSize ≥ 1 (default 20), clamped to `max`. */
export const pageParams = (max = 100) =>
  z.object({
    page: z.coerce.number().int().min(1).max(1_000_000).default(1),
    pageSize: z.coerce
      .number()
      .int()
      .min(1)
      .default(20)
      .transform((n) => Math.min(n, max)),
  });

/** `?dir=`: `asc` or `desc`, anything else falls back to `desc`. */
export const dirParam = z
  .string()
  .optional()
  .transform((v) => (v === 'asc' ? 'asc' : 'desc') as 'asc' | 'desc');

/** `?search=`: trimmed, at most 200 characters of storable text; blank means no search. */
export const searchParam = z
  .string()
  .max(200)
  .refine((s) => !s.includes('\0') && s.isWellFormed(), 'search must not contain NUL characters or unpaired surrogates')
  .optional()
  .transform((v) => (v?.trim() ? v.trim() : undefined));

/** An enum query parameter whose unrecognised values fall back to a default (spec: `sort`). */
export const fallbackEnum = <T extends string>(values: readonly T[], fallback: T) =>
  z
    .string()
    .optional()
    .transform((v) => (values.includes(v as T) ? (v as T) : fallback));

export type PageList<T> = { data: T[]; total: number; page: number; pageSize: number; totalPages: number };

export function pageList<T>(data: T[], total: number, page: number, pageSize: number): PageList<T> {
  return { data, total, page, pageSize, totalPages: Math.ceil(total / pageSize) };
}
