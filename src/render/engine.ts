import {
  CaptureTag,
  Context,
  type FS,
  type FilterImplOptions,
  Liquid,
  type Template,
  Tag,
  type TagToken,
  filters as builtinFilters,
  toValue,
  toValueSync,
} from 'liquidjs';
import type { FieldError } from '../http/errors.ts';
import { BoundedEmitter, RENDER_LIMITS, RenderBudget, RenderLimitError } from './limits.ts';
import { LruCache } from './lru.ts';
import { notClosedMessage, parseTemplate, templateShape } from './parse-template.ts';
import { rewriteShorthands } from './prepass.ts';

/**
 * The Liquid engine for email templates.
 *
 * - Shorthands: `{{ a ?? "b" }}` (fallback when `a` is missing, null or empty; false and 0 are kept)
 *   and `{{ first name }}` (a key with spaces); see prepass.ts.
 * - Subject: plain text, nothing escaped; line breaks become spaces (a subject is one header line).
 * - Body: HTML; every `{{ }}` output is HTML-escaped. Output raw HTML with the `raw` filter as the
 *   last filter: `{{ signature | raw }}`. `escape`/`escape_once` as the last filter escape once.
 * - Sandbox: no file system (`include`, `render`, `layout` and `block` are parse errors), own
 *   properties only, unknown filters are parse errors, and every render is bounded (limits.ts).
 */

export { RenderLimitError } from './limits.ts';

/** A template that does not parse; `field` names the source (subject, body). */
export class TemplateSyntaxError extends Error {
  field?: string;
  constructor(message: string, field?: string) {
    super(message);
    this.name = 'TemplateSyntaxError';
    this.field = field;
  }
}

/** A template that parsed but failed while rendering for reasons other than a limit. */
export class TemplateRenderError extends Error {
  field?: string;
  constructor(message: string, field?: string) {
    super(message);
    this.name = 'TemplateRenderError';
    this.field = field;
  }
}

const budgets = new WeakMap<Context, RenderBudget>();

/** `{% capture %}` into a buffer that counts against the render's output budget. */
class BoundedCaptureTag extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, string> {
    const emitter = new BoundedEmitter(budgets.get(ctx) ?? new RenderBudget());
    yield this.liquid.renderer.renderTemplates(this.templates, ctx, emitter);
    ctx.bottom()[this.variable] = emitter.buffer;
  }
}

function unavailableTag(name: string) {
  return class extends Tag {
    constructor(token: TagToken, remain: ConstructorParameters<typeof Tag>[1], liquid: Liquid) {
      super(token, remain, liquid);
      throw new Error(`the "${name}" tag is not available in email templates`);
    }
    render(): void {}
  };
}

const noFileSystem: FS = {
  exists: async () => false,
  existsSync: () => false,
  readFile: async () => {
    throw new Error('templates cannot read files');
  },
  readFileSync: () => {
    throw new Error('templates cannot read files');
  },
  resolve: (_dir, file) => file,
  contains: async () => false,
  containsSync: () => false,
};

const isMissing = (v: unknown) => v === undefined || v === null || v === '';

type Engine = { liquid: Liquid; cache: LruCache<string, Template[]> };

/**
 * Each engine's cache of parsed templates holds at most 32 MB by an estimate of their heap: plain
 * HTML as its characters, about 1.5 KB a tag or output (measured 1.0–1.7 KB) and, at worst, 150
 * bytes a character of their markup (measured 18–145). Counted in entries alone, 300 templates of
 * 10,000 tags each would have held some 4 GB.
 */
const PARSED_TAG_BYTES = 1_536;
const PARSED_MARKUP_BYTES = 150;
const CACHE_BYTES = 32 * 1024 * 1024;

function createEngine(escapeOutput: boolean): Engine {
  const liquid = new Liquid({
    outputEscape: escapeOutput ? 'escape' : undefined,
    strictFilters: true,
    strictVariables: false,
    ownPropertyOnly: true,
    renderLimit: RENDER_LIMITS.maxMillis,
    memoryLimit: RENDER_LIMITS.maxMemory,
    timezoneOffset: 0,
    fs: noFileSystem,
    root: [],
    partials: [],
    layouts: [],
    relativeReference: false,
    dynamicPartials: false,
    cache: false,
  });
  for (const name of ['include', 'render', 'layout', 'block']) liquid.registerTag(name, unavailableTag(name));
  liquid.registerTag('capture', BoundedCaptureTag);
  liquid.registerFilter('fallback', (value: unknown, fallback: unknown) => (isMissing(toValue(value)) ? fallback : value));
  if (escapeOutput) {
    // An explicit escape is the escape: marked raw so the automatic one is not applied on top.
    for (const name of ['escape', 'escape_once']) {
      liquid.registerFilter(name, { handler: builtinFilters[name] as Exclude<FilterImplOptions, { raw: boolean }>, raw: true });
    }
  }
  return { liquid, cache: new LruCache(300, CACHE_BYTES) };
}

const subjectEngine = createEngine(false);
const bodyEngine = createEngine(true);

const engineFor = (field: string) => (field === 'subject' ? subjectEngine : bodyEngine);

/** Parsed templates are cached by source: workers render the same template for many contacts. */
function parse(engine: Engine, field: string, source: string): Template[] {
  const hit = engine.cache.get(source);
  if (hit) return hit;
  // Checked before the pre-pass and the parse, which would otherwise run over whatever a request carried.
  if (source.length > RENDER_LIMITS.maxSource) throw new TemplateSyntaxError(`template is longer than ${RENDER_LIMITS.maxSource} characters`, field);
  const shape = templateShape(source);
  // A tag left open counts the rest of the source as its markup: say so rather than name a bound.
  const overBound = shape.tags > RENDER_LIMITS.maxTags || shape.markup > RENDER_LIMITS.maxMarkup;
  if (overBound && shape.unclosedAt !== null) throw new TemplateSyntaxError(notClosedMessage(source, shape.unclosedAt), field);
  if (shape.tags > RENDER_LIMITS.maxTags) throw new TemplateSyntaxError(`template has more than ${RENDER_LIMITS.maxTags} tags and outputs`, field);
  if (shape.markup > RENDER_LIMITS.maxMarkup) {
    throw new TemplateSyntaxError(`template has more than ${RENDER_LIMITS.maxMarkup / 1024} KB of characters inside its tags and outputs`, field);
  }
  let templates: Template[];
  try {
    templates = parseTemplate(engine.liquid, rewriteShorthands(source));
  } catch (err) {
    throw new TemplateSyntaxError(err instanceof Error ? err.message : String(err), field);
  }
  engine.cache.set(source, templates, source.length - shape.markup + PARSED_MARKUP_BYTES * shape.markup + PARSED_TAG_BYTES * shape.tags);
  return templates;
}

/**
 * Checking a source this small (or one already parsed) costs the event loop at most a few
 * milliseconds: 256 K characters of HTML about 3 ms, 1,000 tags about 2 ms, 8 KB of markup about
 * 2 ms. The largest sources within the bounds take up to about 55 ms, so the caller checks those
 * on a compose thread (template-check.ts).
 */
const CHEAP_CHECK = { maxSource: 256 * 1024, maxTags: 1_000, maxMarkup: 8 * 1024 } as const;

export function cheapToCheck(field: string, source: string): boolean {
  if (source.length > RENDER_LIMITS.maxSource) return true; // refused before anything parses it
  if (engineFor(field).cache.get(source)) return true;
  if (source.length > CHEAP_CHECK.maxSource) return false;
  const shape = templateShape(source);
  return shape.tags <= CHEAP_CHECK.maxTags && shape.markup <= CHEAP_CHECK.maxMarkup;
}

/** Syntax-checks Liquid sources; one field error per source that does not parse (empty when all parse). */
export function checkTemplates(fields: Record<string, string | undefined | null>): FieldError[] {
  const errors: FieldError[] = [];
  for (const [field, source] of Object.entries(fields)) {
    if (typeof source !== 'string' || source === '') continue;
    try {
      parse(engineFor(field), field, source);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      errors.push({ field, message: `Invalid template: ${message}`, code: 'invalid_template' });
    }
  }
  return errors;
}

function renderField(field: 'subject' | 'body', source: string, vars: Record<string, unknown>): string {
  const engine = engineFor(field);
  const templates = parse(engine, field, source);
  const budget = new RenderBudget();
  // A shallow copy: `{% increment %}` writes into the scope, and the caller's object must not change.
  const ctx = new Context(
    { ...vars },
    engine.liquid.options,
    { sync: true },
    {
      liquid: engine.liquid,
      renderLimit: budget.renderLimit as unknown as Context['renderLimit'],
      memoryLimit: budget.memoryLimit as unknown as Context['memoryLimit'],
    },
  );
  budgets.set(ctx, budget);
  const emitter = new BoundedEmitter(budget);
  try {
    toValueSync(engine.liquid.renderer.renderTemplates(templates, ctx, emitter));
  } catch (err) {
    if (budget.tripped) throw new RenderLimitError(budget.tripped.message, field);
    if (err instanceof RangeError) throw new RenderLimitError('Template output is too large', field);
    throw new TemplateRenderError(err instanceof Error ? err.message : String(err), field);
  }
  return emitter.buffer;
}

/**
 * Renders one email: the subject as plain text on one line, the body as HTML with escaped outputs.
 * Throws TemplateSyntaxError (does not parse), RenderLimitError (a budget exceeded: a subject over
 * 998 characters, over 2 MB of output, too many loop iterations, too long, too much memory) or
 * TemplateRenderError. Never touches the file system. Rendering is synchronous and bounded to about
 * a second per field.
 */
export async function renderEmail(src: { subject: string; body: string }, vars: Record<string, unknown>): Promise<{ subject: string; html: string }> {
  const subject = renderField('subject', src.subject, vars)
    .replace(/[\r\n]+/g, ' ')
    .trim();
  // The source is at most 998 characters, but a loop or a contact's data can make it longer: a
  // header line no relay takes whole, stored on the email and its events.
  if (subject.length > RENDER_LIMITS.maxSubject) {
    throw new RenderLimitError(
      `The rendered subject is ${subject.length.toLocaleString('en-US')} characters long; at most ${RENDER_LIMITS.maxSubject}`,
      'subject',
    );
  }
  const html = renderField('body', src.body, vars);
  return { subject, html };
}
