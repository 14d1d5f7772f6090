import { Script } from 'node:vm';

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
