/** The SQLSTATE of a PostgreSQL error, also when wrapped (drizzle wraps driver errors). */
export function pgErrorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 4 && typeof e === 'object' && e !== null; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A deadlock victim or a serialization failure: PostgreSQL rolled the whole transaction back, so running it again is safe. */
export const isTransientDbError = (err: unknown): boolean => ['40P01', '40001'].includes(pgErrorCode(err) ?? '');
