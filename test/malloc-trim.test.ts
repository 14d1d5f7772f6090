import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildMallocTrim, hasGlibc, loadMallocTrim, mallocThresholdsConfigured } from '../src/native/malloc-trim.ts';

// The malloc_trim addon that `npm start` builds (prestart): it must give freed malloc memory back
// to the system, and a machine that cannot build it must still start Herald.

let dir = '';
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'herald-malloc-trim-'));
});
after(() => rm(dir, { recursive: true, force: true }));

describe('malloc_trim helper', { skip: !hasGlibc() && 'glibc only' }, () => {
  test('built once, it hands freed memory back: a process holding 200 MB of freed buffers drops by more than 100 MB', () => {
    const addon = path.join(dir, 'malloc-trim.node');
    assert.deepEqual(buildMallocTrim(addon), { built: true });
    const builtAt = statSync(addon).mtimeMs;
    assert.deepEqual(buildMallocTrim(addon), { built: true });
    assert.equal(statSync(addon).mtimeMs, builtAt, 'an up-to-date addon is not rebuilt');

    // 100,000 buffers of 2 KB come from malloc; keeping every 50th alive stops free() from
    // returning the rest on its own (only an arena's free top goes back without malloc_trim).
    const script = `
      const { loadMallocTrim } = await import(${JSON.stringify(path.resolve('src/native/malloc-trim.ts'))});
      const { trim } = loadMallocTrim(${JSON.stringify(addon)});
      const rss = () => process.memoryUsage.rss() / 2 ** 20;
      const kept = [];
      let all = [];
      for (let i = 0; i < 100_000; i++) { const b = new Uint8Array(2000).fill(1); all.push(b); if (i % 50 === 0) kept.push(b); }
      all = null;
      gc(); gc();
      const freed = rss();
      const released = trim();
      console.log(JSON.stringify({ freed, trimmed: rss(), released, kept: kept.length }));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' })) as {
      freed: number;
      trimmed: number;
      released: boolean;
    };
    assert.equal(out.released, true);
    assert.ok(out.freed > 200, `the freed buffers stayed resident before the trim (${out.freed.toFixed(0)} MB)`);
    assert.ok(out.freed - out.trimmed > 100, `trimmed from ${out.freed.toFixed(0)} to ${out.trimmed.toFixed(0)} MB`);
  });

  test('the trim threshold it sets gives a freed block at the top of an arena back at once, where glibc had raised the threshold past it', () => {
    const addon = path.join(dir, 'malloc-trim.node');
    assert.deepEqual(buildMallocTrim(addon), { built: true });
    // Freeing a mapped block of 24 MB raises glibc's trim threshold to 48 MB, so a 20 MB block
    // freed at the arena's top stays resident. malloc_trim would give back this one (the main
    // arena's top) but never a thread arena's, which only the thread's own free() trims.
    const script = (setThreshold: boolean) => `
      const { loadMallocTrim, MALLOC_TRIM_THRESHOLD_BYTES } = await import(${JSON.stringify(path.resolve('src/native/malloc-trim.ts'))});
      const addon = loadMallocTrim(${JSON.stringify(addon)});
      const set = ${setThreshold} ? addon.setTrimThreshold(MALLOC_TRIM_THRESHOLD_BYTES) : null;
      const rss = () => process.memoryUsage.rss() / 2 ** 20;
      const collect = async () => { for (let i = 0; i < 2; i++) { gc(); await new Promise((r) => setTimeout(r, 200)); } };
      let mapped = Buffer.allocUnsafeSlow(24 * 2 ** 20).fill(1);
      mapped = null;
      await collect();
      let block = Buffer.allocUnsafeSlow(20 * 2 ** 20).fill(1);
      const held = rss();
      block = null;
      await collect();
      console.log(JSON.stringify({ set, held, freed: rss() }));`;
    const run = (setThreshold: boolean) =>
      JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script(setThreshold)], { encoding: 'utf8' })) as {
        set: boolean | null;
        held: number;
        freed: number;
      };
    const raised = run(false);
    assert.ok(raised.held - raised.freed < 5, `glibc's raised threshold kept the block: ${raised.held.toFixed(0)} -> ${raised.freed.toFixed(0)} MB`);
    const fixed = run(true);
    assert.equal(fixed.set, true);
    assert.ok(fixed.held - fixed.freed > 15, `with the threshold set the block went back: ${fixed.held.toFixed(0)} -> ${fixed.freed.toFixed(0)} MB`);
  });

  test('no compiler or a failing one: reported, nothing built, nothing loaded', () => {
    const addon = path.join(dir, 'none', 'malloc-trim.node');
    const missing = buildMallocTrim(addon, path.join(dir, 'no-such-cc'));
    assert.equal(missing.built, false);
    assert.match(!missing.built ? missing.reason : '', /^no C compiler \(/);
    const failing = buildMallocTrim(addon, 'false');
    assert.equal(failing.built, false);
    assert.match(!failing.built ? failing.reason : '', /^false failed: /);
    assert.equal(existsSync(addon), false);
    assert.equal(loadMallocTrim(addon), null);
  });
});

test('an operator who chose glibc thresholds keeps them', () => {
  assert.equal(mallocThresholdsConfigured({}), false);
  assert.equal(mallocThresholdsConfigured({ MALLOC_TRIM_THRESHOLD_: '131072' }), true);
  assert.equal(mallocThresholdsConfigured({ MALLOC_MMAP_THRESHOLD_: '131072' }), true);
  assert.equal(mallocThresholdsConfigured({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0' }), true);
  assert.equal(mallocThresholdsConfigured({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2', MALLOC_ARENA_MAX: '1' }), false);
});
