import type { FieldError } from '../http/errors.ts';
import type { ComposePool } from './compose-pool.ts';
import { RENDER_LIMITS, RenderLimitError } from './limits.ts';
import { cheapToCheck, checkTemplates } from './engine.ts';

/**
 * Syntax-checks the Liquid sources of a request (a send, a saved template or campaign, a preview):
 * one field error per source that does not parse, in the order given. Small sources are checked
 * here; the largest within the bounds (up to about 55 ms of parsing each) on a compose thread, so
 * that a tenant sending many of them cannot hold the event loop every other request waits on.
 */
export async function checkTemplateSources(pool: ComposePool, fields: Record<string, string | undefined | null>): Promise<FieldError[]> {
  const here: Record<string, string> = {};
  const offLoop: Record<string, string> = {};
  for (const [field, source] of Object.entries(fields)) {
    if (typeof source !== 'string' || source === '') continue;
    if (cheapToCheck(field, source)) here[field] = source;
    else offLoop[field] = source;
  }
  const errors = checkTemplates(here);
  if (Object.keys(offLoop).length > 0) errors.push(...(await pool.check(offLoop).catch((err: unknown) => timedOut(err, offLoop))));
  const order = Object.keys(fields);
  return errors.sort((a, b) => order.indexOf(a.field) - order.indexOf(b.field));
}

/** A check that passed the thread's hard limit (a busy host: the bounds keep a parse far below it) is the template's error. */
function timedOut(err: unknown, fields: Record<string, string>): FieldError[] {
  if (!(err instanceof RenderLimitError)) throw err;
  const message = `Invalid template: checking it took longer than ${RENDER_LIMITS.maxComposeMillis} ms`;
  return Object.keys(fields).map((field) => ({ field, message, code: 'invalid_template' }));
}
