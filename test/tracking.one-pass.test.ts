import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { applyTracking, applyTrackingAndBound, type TrackingOptions } from '../src/mail/tracking.ts';
import { boundNesting, plainText, plainTextOfBounded } from '../src/render/plain-text.ts';

// Link tracking and the text part's pre-pass share one tokenizer pass (applyTrackingAndBound).
// Whatever the markup, the result must be what the two passes give.

const NOW = new Date('2026-11-28T12:00:00Z');
const options = (o: Partial<TrackingOptions> = {}): TrackingOptions => ({
  emailId: '0193f1a2-7c4d-7e00-8a1b-2c3d4e5f6a7b',
  publicUrl: 'https://herald.example',
  secret: 'test-secret-0123456789abcdef',
  opens: true,
  clicks: true,
  ...o,
});

const twoPasses = (html: string, opts: TrackingOptions, maxNesting: number, maxWord: number) => {
  const tracked = applyTracking(html, opts, NOW);
  return { html: tracked, bounded: boundNesting(tracked, maxNesting, maxWord) };
};

const piece = fc.constantFrom(
  '<a href="https://shop.example.com/item?a=1&amp;b=2">',
  '<a href=https://shop.example.com/plain>',
  "<a href='https://shop.example.com/quoted'>",
  '<A HREF="https://Shop.example.com/Upper">',
  '<area href="https://map.example.com/" />',
  '<a href="mailto:ada@example.com">',
  '<a href="https://herald.example/unsubscribe/x">',
  '<a class="x" href="https://shop.example.com/item?a=1&amp;b=2" title="t">',
  '<a href="https://x.example/</body>">',
  '</a>',
  '<body>',
  '</body>',
  '</BODY >',
  '</html>',
  '<!-- </body> -->',
  '<script>if (a</body>) {}</script>',
  '<textarea></body>',
  '<title>',
  '<div>',
  '</div>',
  '<b>',
  '</b>',
  '<p>',
  '<table><tr><td>',
  '<svg><a href="https://svg.example.com/"/>',
  '</svg>',
  '<br/>',
  '<img src="x.png">',
  'word',
  ' ',
  '\n',
  'x'.repeat(40),
  '&amp;',
  '<',
  '<a',
  '<!x',
);
const markup = fc.array(piece, { maxLength: 80 }).map((p) => p.join(''));

describe('link tracking and the text pre-pass in one pass', () => {
  test('give what the two passes give, for generated markup and bounds that make them drop tags and break words', () => {
    fc.assert(
      fc.property(
        markup,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 4, max: 60 }),
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom(
          'https://herald.example',
          'https://herald.example/',
          "https://herald.example/it's",
          'https://herald.example/a>b',
          'https://herald.example/a b',
        ),
        (html, maxNesting, maxWord, opens, clicks, publicUrl) => {
          const opts = options({ opens, clicks, publicUrl });
          assert.deepEqual(applyTrackingAndBound(html, opts, NOW, maxNesting, maxWord), twoPasses(html, opts, maxNesting, maxWord));
        },
      ),
      { numRuns: 3000 },
    );
  });

  test('a newsletter gets the same HTML and text part as before', () => {
    const story = (i: number) =>
      `<tr><td><h2>Story ${i}</h2><p>Lorem ipsum dolor sit amet.</p><p><a href="https://example.com/blog/story-${i}?utm_source=newsletter&amp;utm_medium=email" style="color:#06c">Read story ${i} &rarr;</a></p></td></tr>`;
    const html = `<!doctype html><html><head><title>Spring</title></head><body><table>${Array.from({ length: 40 }, (_, i) => story(i)).join('\n')}</table></body></html>`;
    const one = applyTrackingAndBound(html, options(), NOW);
    const tracked = applyTracking(html, options(), NOW);
    assert.equal(one.html, tracked);
    assert.equal(plainTextOfBounded(one.bounded), plainText(tracked));
    assert.match(one.html, /href="https:\/\/herald\.example\/t\/c\/[A-Za-z0-9_-]+"/);
    assert.match(one.html, /<img src="https:\/\/herald\.example\/t\/o\/[A-Za-z0-9_-]+"[^>]*\/><\/body>/);
  });
});
