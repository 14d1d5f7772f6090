import { type Liquid, type Template, Tokenizer, type TopLevelToken } from 'liquidjs';
import { outputEnd } from './prepass.ts';

/**
 * The tokens of a template, taken from the front one at a time. liquidjs's parser and its block
 * tags consume the token list with `shift()` and test `length`, nothing else. On a plain array
 * each `shift()` moves every remaining element once the array is too large for V8 to trim in
 * place (about 16,000 tokens), so parsing was quadratic: 400 KB of `{{a}}` took 3.3 s, 2 MB
 * would take minutes. Here a `shift()` moves an index.
 */
class TokenQueue {
  private next = 0;
  private readonly tokens: TopLevelToken[];
  constructor(tokens: TopLevelToken[]) {
    this.tokens = tokens;
  }
  get length(): number {
    return this.tokens.length - this.next;
  }
  shift(): TopLevelToken | undefined {
    return this.next < this.tokens.length ? this.tokens[this.next++] : undefined;
  }
}

/** What `liquid.parse(source)` does (without its parse limit: callers bound the source first), in time linear in the number of tokens. */
export function parseTemplate(liquid: Liquid, source: string): Template[] {
  const { operators, groupedExpressions } = liquid.options;
  const tokens = new Tokenizer(source, operators, undefined, undefined, groupedExpressions).readTopLevelTokens(liquid.options);
  // The queue stands in for the array: the parser's only uses of it are shift() and length (above).
  return liquid.parser.parseTokens(new TokenQueue(tokens) as unknown as TopLevelToken[]);
}

/**
 * What parsing a source will cost, counted before it is parsed: its tags and outputs (each
 * statement of a `{% liquid %}` tag counted as one), and the characters between their delimiters.
 * Parsed, a tag holds about 1.5 KB of heap, and markup up to about 150 bytes a character (`{{ a ??
 * b ?? b … }}`, a chain of filters); plain HTML is held as the source's own characters. An
 * over-count is harmless (the shape only bounds and weighs): a delimiter inside a raw block counts
 * as one. Outputs end where liquidjs ends them, at the first `}}` outside a string literal, and tags
 * at the first `%}`; one that is not closed counts the rest of the source as its markup, and
 * `unclosedAt` says where it starts.
 */
export type TemplateShape = { tags: number; markup: number; unclosedAt: number | null };

export function templateShape(source: string): TemplateShape {
  let tags = 0;
  let markup = 0;
  for (let i = source.indexOf('{'); i !== -1 && i < source.length - 1; i = source.indexOf('{', i + 1)) {
    const kind = source[i + 1];
    if (kind !== '{' && kind !== '%') continue;
    const close = kind === '{' ? outputEnd(source, i + 2) : source.indexOf('%}', i + 2);
    if (close === -1) return { tags: tags + 1, markup: markup + source.length - i, unclosedAt: i };
    const end = close + 2;
    tags += kind === '%' && isLiquidTag(source, i) ? 1 + lineBreaks(source, i, end) : 1;
    markup += end - i;
    i = end - 1;
  }
  return { tags, markup, unclosedAt: null };
}

/** liquidjs's message for a tag or output that is not closed at `at`, with its line and column. */
export function notClosedMessage(source: string, at: number): string {
  const before = source.slice(0, at);
  const line = before.split('\n').length;
  const col = at - before.lastIndexOf('\n');
  const snapshot = source.slice(at, at + 32).replace(/\s+/g, ' ');
  return `${source[at + 1] === '{' ? 'output' : 'tag'} "${snapshot}..." not closed, line:${line}, col:${col}`;
}

/** `{% liquid` (with or without the whitespace dash, and any whitespace before the name): a tag whose every line is a statement. */
const LIQUID_TAG = /\{%-?\s*liquid\s/y;

function isLiquidTag(source: string, at: number): boolean {
  LIQUID_TAG.lastIndex = at;
  return LIQUID_TAG.test(source);
}

function lineBreaks(source: string, from: number, to: number): number {
  let count = 0;
  for (let i = source.indexOf('\n', from); i !== -1 && i < to; i = source.indexOf('\n', i + 1)) count++;
  return count;
}
