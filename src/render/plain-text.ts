import { compile } from 'html-to-text';
import { Tokenizer, type TokenizerCallbacks as Callbacks } from 'htmlparser2';

/**
 * The plain-text alternative of an HTML email: one converter for composing (compose-html.ts),
 * building the message (build-message.ts) and the template preview.
 *
 * html-to-text parses with htmlparser2, whose Parser keeps its open-element stack with
 * `Array#unshift`/`shift`/`indexOf`: every start tag costs time proportional to the number of
 * elements still open. Thousands of unclosed tags (`<body><body>…`, `<b><b>…`, `<div><div>…`)
 * make parsing quadratic (256 KB of `<html>`: ~0.7 s). `boundNesting` is a linear pre-pass with
 * htmlparser2's Tokenizer that mirrors the Parser's stack (void elements, implied closes, foreign
 * content, the same close-tag matching) and replaces a start tag that would open an element deeper
 * than MAX_NESTING by an empty comment. Nothing else changes, so ordinary emails (far shallower
 * than the bound) give exactly the same text; text inside the dropped elements is kept, only the
 * dropped elements' own formatting (a block's line breaks) is lost.
 */

/** Deepest element nesting the converter sees; deeper start tags are dropped (their text kept). */
export const MAX_NESTING = 64;

// The Parser's tables (htmlparser2 10, src/Parser.ts), needed to mirror its stack exactly.
const formTags = new Set(['input', 'option', 'optgroup', 'select', 'button', 'datalist', 'textarea']);
const pTag = new Set(['p']);
const tableSectionTags = new Set(['thead', 'tbody']);
const ddtTags = new Set(['dd', 'dt']);
const rtpTags = new Set(['rt', 'rp']);
const openImpliesClose = new Map<string, Set<string>>([
  ['tr', new Set(['tr', 'th', 'td'])],
  ['th', new Set(['th'])],
  ['td', new Set(['thead', 'th', 'td'])],
  ['body', new Set(['head', 'link', 'script'])],
  ['li', new Set(['li'])],
  ['p', pTag],
  ['h1', pTag],
  ['h2', pTag],
  ['h3', pTag],
  ['h4', pTag],
  ['h5', pTag],
  ['h6', pTag],
  ['select', formTags],
  ['input', formTags],
  ['output', formTags],
  ['button', formTags],
  ['datalist', formTags],
  ['textarea', formTags],
  ['option', new Set(['option'])],
  ['optgroup', new Set(['optgroup', 'option'])],
  ['dd', ddtTags],
  ['dt', ddtTags],
  ['address', pTag],
  ['article', pTag],
  ['aside', pTag],
  ['blockquote', pTag],
  ['details', pTag],
  ['div', pTag],
  ['dl', pTag],
  ['fieldset', pTag],
  ['figcaption', pTag],
  ['figure', pTag],
  ['footer', pTag],
  ['form', pTag],
  ['header', pTag],
  ['hr', pTag],
  ['main', pTag],
  ['nav', pTag],
  ['ol', pTag],
  ['pre', pTag],
  ['section', pTag],
  ['table', pTag],
  ['ul', pTag],
  ['rt', rtpTags],
  ['rp', rtpTags],
  ['tbody', tableSectionTags],
  ['tfoot', tableSectionTags],
]);
const voidElements = new Set([
  'area',
  'base',
  'basefont',
  'br',
  'col',
  'command',
  'embed',
  'frame',
  'hr',
  'img',
  'input',
  'isindex',
  'keygen',
  'link',
  'meta',
  'param',
  'source',
  'track',
  'wbr',
]);
const foreignContextElements = new Set(['math', 'svg']);
const htmlIntegrationElements = new Set(['mi', 'mo', 'mn', 'ms', 'mtext', 'annotation-xml', 'foreignobject', 'desc', 'title']);
/** Start tags after which the tokenizer reads raw text: dropping one would turn its content into markup. */
const rawTextElements = new Set(['script', 'style', 'title', 'textarea', 'xmp']);

/**
 * Longest run of text without whitespace, across tags, before a space is inserted between two of
 * its text pieces. html-to-text joins adjacent inline text (`a<b>b</b>c…`) into one word and, once
 * it is longer than a line, copies the whole word again for every piece added: quadratic in the
 * number of pieces. No reader needs a 2,000-character word intact.
 */
export const MAX_WORD = 2000;
/** html-to-text's whitespace characters (its `whitespaceCharacters` default). */
const isWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c || c === 0x200b;

/**
 * Where to break before a text piece that starts at `start`. The tokenizer gives an unfinished
 * `<text`, `<!x` or `<?x` at the very end of the document as text without its `<` (and `!`, `?`, `/`);
 * a space between them would make the `<` a character of the text, so the break goes before the `<`.
 */
function unfinishedMarkupStart(html: string, start: number, from: number): number {
  let i = start - 1;
  while (i >= from && (html[i] === '!' || html[i] === '?' || html[i] === '/')) i--;
  return i >= from && html[i] === '<' ? i : start;
}

/** Replaces a dropped start tag: begins with `<` and ends with `>`, so the text around it tokenizes as before. */
const DROPPED = '<!---->';

/** A replacement of `html.slice(start, end)` by `text` (an insertion when start = end). */
export type Edit = { start: number; end: number; text: string };

/** `html` with `edits` (in order, not overlapping) applied. */
export function applyEdits(html: string, edits: readonly Edit[]): string {
  if (edits.length === 0) return html;
  const parts: string[] = [];
  let at = 0;
  for (const edit of edits) {
    parts.push(html.slice(at, edit.start), edit.text);
    at = edit.end;
  }
  parts.push(html.slice(at));
  return parts.join('');
}

/** Tokenizer callbacks that see the same pass as the bounding (link tracking's, tracking.ts). */
export type Alongside = Partial<
  Pick<Callbacks, 'onopentagname' | 'onattribname' | 'onattribdata' | 'onattribend' | 'onopentagend' | 'onselfclosingtag' | 'onclosetag'>
>;

/**
 * `html` with every start tag that would open an element deeper than `maxNesting` (in
 * htmlparser2's HTML-mode tree) replaced by an empty comment, and a space between two text pieces
 * that continue a run of more than `maxWord` characters without whitespace (outside script, style
 * and the other raw-text elements). Linear in the length of `html`.
 */
export function boundNesting(html: string, maxNesting: number = MAX_NESTING, maxWord: number = MAX_WORD): string {
  if (html.length <= Math.min(maxNesting * 3, maxWord)) return html; // nothing to bound: each level costs at least `<a>`
  return applyEdits(html, boundingEdits(html, maxNesting, maxWord));
}

/** boundNesting's edits, in order, from one tokenizer pass that also runs `alongside`'s callbacks. */
export function boundingEdits(html: string, maxNesting: number, maxWord: number, alongside: Alongside = {}): Edit[] {
  // The mirrored Parser state; the top of each stack is its last entry (the Parser's is its first).
  const stack: string[] = [];
  const open = new Map<string, number>();
  const foreign: boolean[] = [false];
  const edits: Edit[] = [];
  let copiedTo = 0; // the end of the last edit
  let tagName = '';
  let dropFrom = -1; // start of the start tag being dropped, or -1
  let run = 0; // characters since the last whitespace in text

  const push = (name: string) => {
    stack.push(name);
    open.set(name, (open.get(name) ?? 0) + 1);
  };
  const pop = () => {
    const name = stack.pop() as string;
    open.set(name, (open.get(name) as number) - 1);
    return name;
  };
  const drop = (endIndex: number) => {
    edits.push({ start: dropFrom, end: endIndex, text: DROPPED });
    copiedTo = endIndex;
    dropFrom = -1;
  };
  const endOpenTag = (endIndex: number, selfClosing: boolean) => {
    if (dropFrom !== -1) return drop(endIndex + 1);
    // The Parser honours `/>` only in foreign content (svg, math), where it closes the element.
    if (selfClosing && foreign[foreign.length - 1] && stack[stack.length - 1] === tagName) pop();
  };

  const tokenizer = new Tokenizer(
    { decodeEntities: false },
    {
      onopentagname: (start, end) => {
        alongside.onopentagname?.(start, end);
        const name = html.slice(start, end).toLowerCase();
        tagName = name;
        const impliesClose = openImpliesClose.get(name);
        if (
          stack.length >= maxNesting &&
          !voidElements.has(name) &&
          !rawTextElements.has(name) &&
          !(impliesClose && impliesClose.has(stack[stack.length - 1] as string))
        ) {
          dropFrom = start - 1; // the `<` before the name
          return;
        }
        if (impliesClose) while (stack.length > 0 && impliesClose.has(stack[stack.length - 1] as string)) pop();
        if (!voidElements.has(name)) {
          push(name);
          if (foreignContextElements.has(name)) foreign.push(true);
          else if (htmlIntegrationElements.has(name)) foreign.push(false);
        }
      },
      onopentagend: (endIndex) => {
        alongside.onopentagend?.(endIndex);
        endOpenTag(endIndex, false);
      },
      onselfclosingtag: (endIndex) => {
        alongside.onselfclosingtag?.(endIndex);
        endOpenTag(endIndex, true);
      },
      onclosetag: (start, end) => {
        alongside.onclosetag?.(start, end);
        const name = html.slice(start, end).toLowerCase();
        if (foreignContextElements.has(name) || htmlIntegrationElements.has(name)) foreign.pop();
        // `</x>` closes everything up to the innermost open x; an unmatched one changes nothing
        // (an unmatched `</p>` opens and closes an empty p, `</br>` is a br).
        if (!voidElements.has(name) && (open.get(name) ?? 0) > 0) while (pop() !== name);
      },
      onattribname: alongside.onattribname ?? (() => {}),
      onattribdata: alongside.onattribdata ?? (() => {}),
      onattribentity: () => {},
      onattribend: alongside.onattribend ?? (() => {}),
      oncdata: () => {},
      oncomment: () => {},
      ondeclaration: () => {},
      onprocessinginstruction: () => {},
      ontext: (start, end) => {
        if (rawTextElements.has(stack[stack.length - 1] as string)) return;
        if (run >= maxWord && !isWhitespace(html.charCodeAt(start))) {
          const at = unfinishedMarkupStart(html, start, copiedTo);
          edits.push({ start: at, end: at, text: ' ' });
          copiedTo = at;
          run = 0;
        }
        let i = end - 1;
        while (i >= start && !isWhitespace(html.charCodeAt(i))) i--;
        run = i < start ? run + (end - start) : end - 1 - i;
      },
      ontextentity: () => {},
      onend: () => {},
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  // An unfinished start tag at the very end opens nothing in the Parser either: it stays as it is.
  return edits;
}

// Compiled once: convert() would rebuild its selector tables for every message.
const convert = compile({ wordwrap: 78, selectors: [{ selector: 'img', format: 'skip' }], limits: { maxInputLength: 5_000_000 } });

/** The plain-text alternative of `html`; linear in its length. */
export function plainText(html: string): string {
  return convert(boundNesting(html));
}

/** The plain-text alternative of HTML that has been through `boundNesting` already (tracking.ts's applyTrackingAndBound). */
export function plainTextOfBounded(bounded: string): string {
  return convert(bounded);
}
