/**
 * How an error is written to the log: the logger's `err` serializer (logger.ts, runtime.ts) and the
 * explicit `error:` fields both use it, so no log line holds a database error's message or detail,
 * which carry the query's values (an email address, a field a user sent).
 */

type DatabaseError = { code?: unknown; routine?: unknown; constraint?: unknown; table?: unknown; column?: unknown };

/** The PostgreSQL error behind `err` (Drizzle wraps the driver's error as `cause`), if any. */
export function databaseErrorOf(err: unknown): DatabaseError | null {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as DatabaseError).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && 'routine' in e) return e as DatabaseError;
  }
  return null;
}

/**
 * What a log line says about an error: its type, message and stack, and for a database error its
 * SQLSTATE and the constraint, table or column involved. Never the query's parameters, the row's
 * values or the request body: a driver error's message carries its parameters, so it is left out.
 */
export function loggableError(err: unknown): Record<string, unknown> {
  const db = databaseErrorOf(err);
  const e = err instanceof Error ? err : new Error(String(err));
  // A thrown non-Error has no stack of its own (the new Error's would point here).
  const stack = (err instanceof Error ? err.stack : undefined)
    ?.split('\n')
    .filter((l) => l.trimStart().startsWith('at '))
    .slice(0, 12)
    .join('\n');
  if (db) {
    return {
      type: e.name,
      message: 'database error',
      sqlState: db.code,
      routine: db.routine,
      constraint: db.constraint,
      table: db.table,
      column: db.column,
      stack,
    };
  }
  return { type: e.name, message: e.message.slice(0, 300), stack };
}
