import { setFlagsFromString } from 'node:v8';
import { Script, runInNewContext } from 'node:vm';

/**
 * Lets V8's memory reducer run when the process goes quiet. The reducer shrinks the heap (old
 * space compacted, the young generation and pooled pages released) once V8 judges the allocation
 * rate low, and that judgement includes the rate of the C++ heap Node embeds (cppgc). Since V8
 * 13.1 (Node 24) a C++ heap that has never allocated reports a rate of exactly 0, which V8 reads
 * as the highest rate: every check answers "high alloc" and only the 100 s watchdog after the last
 * full GC ever reduces (bench/README.md § idle has the traces). Compiling a tiny `vm.Script`
 * allocates one cppgc object, which keeps that rate above 0 and decaying; V8 still decides alone
 * whether and when to collect. Nothing here forces a GC.
 */
export function keepMemoryReducerWorking(): void {
  // At once, so the reducer can already act when start-up's work settles; then within the ~100 s
  // in which the decaying rate underflows to 0.
  const allocate = () => new Script('0');
  allocate();
  setInterval(allocate, 10_000).unref();
}

const SHRINK_AT_MOST_EVERY_MS = 60_000;
let lastShrink = 0;
type GarbageCollector = (options: { type: 'major'; flavor: 'last-resort' }) => void;
let collectGarbage: GarbageCollector | null = null;

/**
 * One memory-reducing full GC once work is over: the compose pool calls it as its
 * threads end, 60 s after their last message, and main.ts once, 5 s after start-up. A burst of
 * sending grows the main thread's young generation to its full semi-spaces with scavenges only, and
 * V8 arms its memory reducer only after a mark-compact, so the grown heap (~30 MB) stayed until
 * the next one, which an idle process may never make (bench/README.md § idle). This GC shrinks
 * it: 60–80 ms, at most once a minute.
 */
export function shrinkHeapAfterWork(): void {
  const now = Date.now();
  if (now - lastShrink < SHRINK_AT_MOST_EVERY_MS) return;
  lastShrink = now;
  collectGarbage ??= exposedGc();
  collectGarbage({ type: 'major', flavor: 'last-resort' });
}

/** V8's gc(), which it gives only to contexts created after --expose-gc is set. */
function exposedGc(): GarbageCollector {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as GarbageCollector;
}
