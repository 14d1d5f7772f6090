import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { renderEmail } from '../src/render/engine.ts';
import { LruCache } from '../src/render/lru.ts';

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapUsed = () => {
  gc();
  gc();
  return v8.getHeapStatistics().used_heap_size;
};

describe('the cache of parsed templates', () => {
  test('a weighted LRU evicts the least recently used entries past its weight, and never stores an entry heavier than the bound', () => {
    const cache = new LruCache<string, string>(10, 10);
    const set = (key: string, value: string) => cache.set(key, value, value.length);
    set('a', 'aaaa');
    set('b', 'bbbb');
    assert.equal(cache.get('a'), 'aaaa'); // a is now the most recently used
    set('c', 'cccc'); // 12 > 10: b goes
    assert.equal(cache.get('b'), undefined);
    assert.equal(cache.get('a'), 'aaaa');
    assert.equal(cache.get('c'), 'cccc');
    set('huge', 'x'.repeat(11));
    assert.equal(cache.get('huge'), undefined, 'heavier than the whole bound: not stored');
    assert.equal(cache.get('a'), 'aaaa', 'and nothing was evicted for it');
    set('a', 'a'); // replacing an entry counts its new weight only: 1 + 4
    set('d', 'ddddd'); // 10: all three stay
    assert.deepEqual(
      ['a', 'c', 'd'].map((k) => cache.get(k)),
      ['a', 'cccc', 'ddddd'],
    );
    cache.delete('c');
    set('e', 'eeee'); // 1 + 5 + 4 = 10
    assert.deepEqual(
      ['a', 'd', 'e'].map((k) => cache.get(k)),
      ['a', 'ddddd', 'eeee'],
    );
    const counted = new LruCache<number, number>(2);
    [1, 2, 3].forEach((n) => counted.set(n, n));
    assert.deepEqual(
      [1, 2, 3].map((n) => counted.get(n)),
      [undefined, 2, 3],
      'the entry bound holds without a weight',
    );
  });

  test('twelve templates of 10,000 outputs each do not stay in memory (about 10 MB of heap each, parsed)', async () => {
    const before = heapUsed();
    for (let i = 0; i < 12; i++) {
      const { html } = await renderEmail({ subject: 's', body: `<p>${i}</p>${'{{a}}'.repeat(10_000)}` }, { a: 1 });
      assert.equal(html.length, `<p>${i}</p>`.length + 10_000);
    }
    // The cache holds 32 MB by its estimate (two of these); held by entry count alone, all twelve stayed (150+ MB).
    const grown = (heapUsed() - before) / 2 ** 20;
    assert.ok(grown < 64, `the heap grew by ${grown.toFixed(0)} MB`);
  });
});
