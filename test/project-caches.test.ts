import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TtlCache } from '../src/cache/project-caches.ts';

/** The per-process project caches (sender domains, tracked segments): one lookup per expired key, however many requests ask. */

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
});
