import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

// shrinkHeapAfterWork() runs in the process that `npm start` runs, with its flags: a burst of
// allocation grows the young generation to its 16 MB semi-spaces, and the call gives it back.

test('after a burst, shrinkHeapAfterWork() gives the grown young generation back, at most once a minute', () => {
  const script = `
    import v8 from 'node:v8';
    const { shrinkHeapAfterWork } = await import(${JSON.stringify(path.resolve('src/memory-reducer.ts'))});
    const newSpaceMb = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 2 ** 20;
    const burst = () => { let keep = []; for (let i = 0; i < 3_000_000; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 1000) keep = []; } };
    burst();
    const grown = newSpaceMb();
    shrinkHeapAfterWork();
    const shrunk = newSpaceMb();
    burst();
    const regrown = newSpaceMb();
    shrinkHeapAfterWork(); // within the minute: nothing
    console.log(JSON.stringify({ grown, shrunk, regrown, again: newSpaceMb() }));`;
  const out = JSON.parse(execFileSync(process.execPath, ['--max-semi-space-size=16', '--input-type=module', '-e', script], { encoding: 'utf8' })) as Record<
    string,
    number
  >;
  assert.ok(out.grown >= 16, `the burst grew the young generation (${out.grown} MB)`);
  assert.ok(out.shrunk <= 4, `shrunk from ${out.grown} to ${out.shrunk} MB`);
  assert.ok(out.regrown >= 16 && out.again === out.regrown, `a second call within the minute collects nothing (${out.regrown} → ${out.again} MB)`);
});
