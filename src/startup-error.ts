/**
 * A start-up failure a person can act on: `message` is one line saying what is wrong and what to
 * change; `cause` (when set) is the underlying error, printed on a second line.
 */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** The lines printed when start-up fails: what to do, then the cause. Never a stack. */
export function describeStartupFailure(err: unknown): string[] {
  const lines = [`Herald could not start: ${oneLine(err)}`];
  const seen = new Set<unknown>([err]);
  let cause = err instanceof Error ? err.cause : undefined;
  while (cause !== undefined && !seen.has(cause)) {
    seen.add(cause);
    lines.push(`  cause: ${oneLine(cause)}`);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return lines;
}

function oneLine(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const text = err.message.trim() || err.name;
    const withCode = typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text;
    return withCode.replace(/\s*\n\s*/g, ' ');
  }
  return String(err).replace(/\s*\n\s*/g, ' ');
}
