import assert from 'node:assert/strict';
import { describe, mock, test } from 'node:test';
import { TtlCache } from '../src/cache/project-caches.ts';
import { MemorySlidingStore } from '../src/http/rate-limit.ts';

/** The per-process caches and counters: one lookup per expired key, however many requests ask; nothing kept for projects gone quiet. */

describe('TtlCache.getOrLoad', () => {
  test('concurrent misses of one key share one load, and the value is then cached', async () => {
    const cache = new TtlCache<string>({ ttlMs: 60_000, max: 10 });
    const pending = Promise.withResolvers<string>();
    let loads = 0;
    const load = () => ((loads += 1), pending.promise);
    const asks = Array.from({ length: 50 }, () => cache.getOrLoad('prj_a', 'example.com', load));
    const other = cache.getOrLoad('prj_b', 'example.com', async () => ((loads += 1), 'b'));
    pending.resolve('a');
    assert.deepEqual(await Promise.all(asks), Array(50).fill('a'));
    assert.equal(await other, 'b');
    assert.equal(loads, 2, 'one load per project and key');
    assert.equal(await cache.getOrLoad('prj_a', 'example.com', load), 'a');
    assert.equal(loads, 2, 'then served from the cache');
  });

  test('a failed load fails every request that waited for it and caches nothing', async () => {
    const cache = new TtlCache<string>({ ttlMs: 60_000, max: 10 });
    const pending = Promise.withResolvers<string>();
    const asks = [1, 2, 3].map(() => cache.getOrLoad('prj_a', 'k', () => pending.promise));
    pending.reject(new Error('not verified'));
    for (const ask of asks) await assert.rejects(ask, /not verified/);
    assert.equal(await cache.getOrLoad('prj_a', 'k', async () => 'now verified'), 'now verified');
  });

  test('a load in flight when the project is evicted is not stored: the next request loads again', async () => {
    const cache = new TtlCache<string>({ ttlMs: 60_000, max: 10 });
    const pending = Promise.withResolvers<string>();
    const before = cache.getOrLoad('prj_a', 'k', () => pending.promise);
    cache.evictProject('prj_a');
    const after = cache.getOrLoad('prj_a', 'k', async () => 'after the change');
    pending.resolve('before the change');
    assert.equal(await before, 'before the change');
    assert.equal(await after, 'after the change');
    assert.equal(cache.get('prj_a', 'k'), 'after the change');
  });

  test("evictProject drops every key of the project, however many it has, and no other project's", () => {
    const cache = new TtlCache<number>({ ttlMs: 60_000, max: 30_000 });
    for (let i = 0; i < 12_000; i++) cache.set('prj_a', `k${i}`, i);
    cache.set('prj_ab', 'k0', -1); // a project id that starts with the other's
    cache.set('prj_b', 'k0', -2);
    cache.evictProject('prj_a');
    assert.deepEqual(
      [0, 9_999, 10_000, 11_999].map((i) => cache.get('prj_a', `k${i}`)),
      [undefined, undefined, undefined, undefined],
    );
    assert.equal(cache.get('prj_ab', 'k0'), -1);
    assert.equal(cache.get('prj_b', 'k0'), -2);
  });
});

describe('the rate limit counters of one process', () => {
  test('a key silent for two windows is dropped at the next window, and counts as a new key; the active ones keep counting', () => {
    mock.timers.enable({ apis: ['Date'], now: 60_000 * 1_000 });
    try {
      const store = new MemorySlidingStore();
      const counts: number[] = [];
      const incr = (key: string) => store.incr(key, (_err, res) => counts.push(res!.current), 60_000);
      for (let i = 0; i < 1_000; i++) incr(`user:${i}`);
      incr('prj_busy:private');
      assert.equal(store.size, 1_001);
      mock.timers.tick(60_000); // the next window: every key still counts in the sliding minute
      incr('prj_busy:private');
      assert.equal(store.size, 1_001);
      mock.timers.tick(60_000); // two windows on: the silent keys are dropped
      incr('prj_busy:private');
      assert.equal(store.size, 1);
      assert.deepEqual(counts.slice(-3), [1, 2, 2], 'the busy key counts on: its previous window weighs in');
      incr('user:0');
      assert.equal(counts.at(-1), 1, 'a dropped key starts from nothing, as it would have anyway');
    } finally {
      mock.timers.reset();
    }
  });
});
