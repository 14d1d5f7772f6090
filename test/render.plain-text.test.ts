import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseDocument } from 'htmlparser2';
import { compile } from 'html-to-text';
import { MAX_NESTING, MAX_WORD, boundNesting, plainText } from '../src/render/plain-text.ts';

/** html-to-text exactly as the converter configures it, without the pre-pass. */
const rawConvert = compile({ wordwrap: 78, selectors: [{ selector: 'img', format: 'skip' }], limits: { maxInputLength: 5_000_000 } });

type DomNode = { type: string; data?: string; children?: DomNode[] };

/** Deepest element nesting of htmlparser2's tree (as html-to-text parses it) and its text, iteratively. */
function shape(html: string): { depth: number; text: string } {
  const doc = parseDocument(html) as unknown as DomNode;
  let depth = 0;
  let text = '';
  const todo: [DomNode, number][] = [[doc, 0]];
  while (todo.length > 0) {
    const [node, d] = todo.pop() as [DomNode, number];
    if (node.type === 'text') text += node.data;
    const isElement = node.type === 'tag' || node.type === 'script' || node.type === 'style';
    const childDepth = isElement ? d + 1 : d;
    if (isElement) depth = Math.max(depth, childDepth);
    for (let i = (node.children ?? []).length - 1; i >= 0; i--) todo.push([(node.children as DomNode[])[i] as DomNode, childDepth]);
  }
  return { depth, text };
}

const ORDINARY = [
  `<!doctype html><html><head><title>Welcome</title><style>p { color: red }</style></head><body>
   <table role="presentation" width="100%"><tr><td align="center">
     <table width="600"><tbody><tr><td><h1>Hello Ann</h1>
       <p>Thanks for signing up. <b>Confirm</b> your address:<br><a href="https://example.com/confirm?t=abc&amp;x=1">Confirm</a></p>
       <ul><li>One<li>Two</ul><p>Unclosed paragraph<p>Another one</p>
       <img src="https://example.com/logo.png" alt="Logo"><pre>  keep   this </pre>
       <svg width="1" height="1"><path d="M0 0"/><title>icon</title></svg>
     </td></tr></tbody></table>
   </td></tr></table><script>var x = "<b>";</script></body></html>`,
  '<p>Just a short note.</p>',
  'plain text, no markup at all',
];

describe('plain-text alternative', () => {
  test('ordinary emails pass the pre-pass unchanged, so their text is exactly html-to-text’s', () => {
    for (const html of ORDINARY) {
      assert.equal(boundNesting(html), html);
      assert.equal(plainText(html), rawConvert(html));
    }
    assert.equal(
      plainText(ORDINARY[0] as string),
      [
        'HELLO ANN',
        '',
        'Thanks for signing up. Confirm your address:',
        'Confirm [https://example.com/confirm?t=abc&x=1]',
        '',
        ' * One',
        ' * Two',
        '',
        'Unclosed paragraph',
        '',
        'Another one',
        '',
        '  keep   this ',
        '',
        'icon',
      ].join('\n'),
    );
  });

  test('thousands of unclosed tags nest no deeper than the bound, and their text is kept', () => {
    const html = '<body><div>a '.repeat(5000) + 'end';
    const bounded = boundNesting(html);
    const { depth, text } = shape(bounded);
    assert.equal(depth, MAX_NESTING);
    assert.equal(text, shape(html).text);
    assert.equal(plainText(html).replace(/\s+/g, ' ').trim(), `${'a '.repeat(5000)}end`.trim());
  });

  test('a word built from thousands of inline pieces is broken after MAX_WORD characters', () => {
    const text = plainText(`<p>${'ab<b>cd</b>'.repeat(1000)}</p>`);
    assert.equal(text.replace(/\s/g, ''), 'abcd'.repeat(1000));
    const words = text.split(/\s+/);
    assert.equal(words.length, 2);
    assert.equal((words[0] as string).length, MAX_WORD);
  });

  test('script and style content is never split nor turned into markup', () => {
    const script = `<script>${'x<b>y</b>'.repeat(1000)}</script>`;
    const html = '<div>'.repeat(10) + script;
    assert.equal(boundNesting(html, 4, 10), '<div>'.repeat(4) + '<!---->'.repeat(6) + script);
  });

  // The pre-pass mirrors htmlparser2's open-element stack; generated markup checks the mirror both
  // ways: it never drops a tag of a tree within the bound, and never lets the tree pass the bound.
  const piece = fc.constantFrom(
    '<p>',
    '</p>',
    '<div>',
    '</div>',
    '<DIV>',
    '</Div>',
    '<b>',
    '</b>',
    '<ul>',
    '</ul>',
    '<li>',
    '<table>',
    '<tr>',
    '<td>',
    '<tbody>',
    '</table>',
    '<svg>',
    '</svg>',
    '<path/>',
    '<div/>',
    '<br>',
    '</br>',
    '<br/>',
    '<img src=x>',
    '<math>',
    '<mi>',
    '</mi>',
    '<title>',
    '</title>',
    '<script>',
    '</script>',
    '<body>',
    '<head>',
    '<html>',
    '<dd>',
    '<dt>',
    '<select>',
    '<option>',
    '<input>',
    '<h1>',
    '<a href="x>y">',
    '</a>',
    '<!--',
    '-->',
    '<',
    '>',
    '"',
    '=',
    'text',
    ' ',
    'x<y',
    '<b',
    '</b',
  );
  const markup = fc.array(piece, { maxLength: 120 }).map((p) => p.join(''));

  test('generated markup: within the bound nothing changes; beyond it the tree is bounded and the text kept', () => {
    fc.assert(
      fc.property(markup, fc.integer({ min: 1, max: 8 }), (html, max) => {
        const before = shape(html);
        const bounded = boundNesting(html, max, Infinity);
        if (before.depth <= max) assert.equal(bounded, html);
        const after = shape(bounded);
        // +1: an element that starts raw text (script, title…) is kept at any depth.
        assert.ok(after.depth <= max + 1, `depth ${after.depth} > ${max + 1} for ${JSON.stringify(html)}`);
        assert.equal(after.text, before.text);
      }),
      { numRuns: 2000 },
    );
  });

  test('a word break before unfinished markup at the end goes before its <', () => {
    // The tokenizer gives `<text` (or `<!x`, `<?x`) at the very end as text without the `<`; a space
    // after the `<` would have made it a character of the text (found by the property below).
    for (const [html, bounded] of [
      ['--><text', '--> <text'],
      ['ab<!x', 'ab <!x'],
      ['ab<?x', 'ab <?x'],
      ['a<b>c</b>d', 'a<b> c</b> d'],
    ]) {
      assert.equal(boundNesting(html, 1000, 1), bounded);
      assert.equal(shape(bounded).text.replace(/\s/g, ''), shape(html).text.replace(/\s/g, ''));
    }
  });

  test('generated markup: word breaks only add whitespace', () => {
    fc.assert(
      fc.property(markup, fc.integer({ min: 1, max: 12 }), (html, maxWord) => {
        const bounded = boundNesting(html, 1000, maxWord);
        assert.equal(shape(bounded).text.replace(/\s/g, ''), shape(html).text.replace(/\s/g, ''));
      }),
      { numRuns: 1000 },
    );
  });
});
