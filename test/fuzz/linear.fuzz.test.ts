import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { composeHtml } from '../../src/render/compose-html.ts';
import { applyTracking } from '../../src/mail/tracking.ts';

/**
 * The time property of issue 14: link tracking and rendering of generated HTML up to 256 KB grow
 * linearly, under 100 ms per 64 KB. The machine running tests is shared, so the absolute bound
 * carries FUZZ_TIME_SLACK (default 3); the linearity check (256 KB within ~4× of 64 KB) does not
 * depend on the machine.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 8);
const SLACK = Number(process.env.FUZZ_TIME_SLACK ?? 3);
const TRACKING = { emailId: '00000000-0000-4000-8000-000000000001', publicUrl: 'https://h.example', secret: 's', opens: true, clicks: true };

const piece = fc.constantFrom(
  '<a ',
  '<a href="',
  '<a href=',
  '"',
  "'",
  '<',
  '>',
  '</a>',
  '&amp;',
  '&#x',
  'href=',
  ' ',
  'https://x.example/p?q=1',
  '<area ',
  '<!--',
  '-->',
  '<script>',
  '</script>',
  '<body>',
  '</body',
  'text',
  '=',
);
const fragment = fc.array(piece, { minLength: 1, maxLength: 12 }).map((p) => p.join(''));

function timeOf(work: () => unknown): number {
  let best = Infinity;
  for (let i = 0; i < 2; i++) {
    const t = performance.now();
    work();
    best = Math.min(best, performance.now() - t);
  }
  return best;
}

const fill = (f: string, bytes: number) => f.repeat(Math.ceil(bytes / f.length)).slice(0, bytes);

describe('linear time', () => {
  test('link tracking: under 100 ms per 64 KB, 256 KB within ~4× of 64 KB', () => {
    fc.assert(
      fc.property(fragment, (f) => {
        const small = timeOf(() => applyTracking(fill(f, 64 * 1024), TRACKING));
        const large = timeOf(() => applyTracking(fill(f, 256 * 1024), TRACKING));
        assert.ok(small < 100 * SLACK, `64 KB of ${JSON.stringify(f.slice(0, 40))}: ${small.toFixed(0)} ms`);
        assert.ok(large < 4 * 100 * SLACK && large < 8 * small + 50, `256 KB: ${large.toFixed(0)} ms (64 KB: ${small.toFixed(0)} ms)`);
      }),
      { numRuns: RUNS },
    );
  });

  // The plain-text alternative was the superlinear part: htmlparser2's open-element stack on
  // thousands of unclosed tags, and html-to-text's re-copy of a long word for every inline piece
  // (src/render/plain-text.ts bounds both with a linear pre-pass).
  test('rendering and composing: under 100 ms per 64 KB, 256 KB within ~4× of 64 KB', async () => {
    await fc.assert(
      fc.asyncProperty(fragment, async (f) => {
        const run = async (bytes: number) => {
          const t = performance.now();
          await composeHtml({ subject: 's', body: fill(f, bytes).replaceAll('{', '('), vars: {}, footer: null, tracking: TRACKING }).catch(() => null);
          return performance.now() - t;
        };
        await run(1024); // warm the parse cache's code paths
        const small = await run(64 * 1024);
        const large = await run(256 * 1024);
        assert.ok(small < 100 * SLACK, `64 KB of ${JSON.stringify(f.slice(0, 40))}: ${small.toFixed(0)} ms`);
        assert.ok(large < 4 * 100 * SLACK && large < 8 * small + 100, `256 KB: ${large.toFixed(0)} ms (64 KB: ${small.toFixed(0)} ms)`);
      }),
      { numRuns: RUNS },
    );
  });
});
