import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MAX_OUTPUT, RenderLimitError, Renderer, renderString } from '../src/modules/workflows/engine/variables.ts';

/**
 * WEBHOOK `{{variables}}` rendering is bounded while it runs (decisions.md § 7): a string stops at
 * MAX_OUTPUT, a value is serialised once however many tags name it, a cut string does not keep
 * the long string it was cut from alive, and a JSON body stops at its limit.
 */

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const BLOB = 'x'.repeat(250_000);

/** Contact data like the audit's (250 KB), counting how often it is serialised. */
function countedData() {
  const counter = { serialised: 0 };
  const data = {
    blob: BLOB,
    toJSON() {
      counter.serialised++;
      return { blob: BLOB };
    },
  };
  return { counter, vars: { data, event: {} } };
}

test('124 × {{data}} of 250 KB renders 64 KB, serialising the value once', () => {
  const { counter, vars } = countedData();
  const out = renderString('{{data}}'.repeat(124), vars);
  assert.equal(out.length, MAX_OUTPUT);
  assert.equal(out, `{"blob":"${BLOB}`.slice(0, MAX_OUTPUT));
  assert.equal(counter.serialised, 1);
});

test('fifty 64 KB cuts hold about their own size, not the strings they were cut from', () => {
  const { vars } = countedData();
  gc();
  const before = process.memoryUsage().heapUsed;
  const held = Array.from({ length: 50 }, () => renderString('{{data}}'.repeat(20), vars));
  gc();
  const grownMb = (process.memoryUsage().heapUsed - before) / 1e6;
  assert.equal(
    held.reduce((n, s) => n + s.length, 0),
    50 * MAX_OUTPUT,
  );
  assert.ok(grownMb < 20, `the heap grew by ${grownMb.toFixed(1)} MB holding ${((50 * MAX_OUTPUT) / 1e6).toFixed(1)} MB of text`);
});

test('a JSON body keeps typed values and stops at its limit', () => {
  const { counter, vars } = countedData();
  const render = new Renderer({ ...vars, email: 'a@b.test', event: { amount: 42 } });
  assert.equal(
    render.jsonBody(
      { amount: '{{event.amount}}', missing: '{{event.none}}', note: 'for {{email}}', plan: '{{event.plan ?? "free"}}', n: [1, null, true] },
      1000,
    ),
    '{"amount":42,"missing":null,"note":"for a@b.test","plan":"free","n":[1,null,true]}',
  );
  assert.throws(
    () =>
      render.jsonBody(
        Array.from({ length: 6000 }, () => '{{data}}'),
        1024 * 1024,
      ),
    RenderLimitError,
  );
  assert.equal(counter.serialised, 1, 'serialised once for the whole body');
  assert.equal(render.jsonBody(['{{data}}', '{{data}}'], 1024 * 1024).length, 2 * JSON.stringify({ blob: BLOB }).length + 3);
});
