import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `npm run bench -- <name> [args]` runs bench/<name>.ts, whose `run(args)` prints its figures.
 * `run.ts`, `lib.ts` and files starting with `_` are not benchmarks.
 */

type Benchmark = { run: (args: string[]) => Promise<void> };

const dir = path.dirname(fileURLToPath(import.meta.url));
const available = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'lib.ts'].includes(f) && !f.startsWith('_') && !f.endsWith('.d.ts'))
  .map((f) => f.slice(0, -3))
  .sort();

const [name, ...args] = process.argv.slice(2);
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <name>\navailable: ${available.join(', ')}`);
  process.exit(1);
}

const bench = (await import(`./${name}.ts`)) as Benchmark;
await bench.run(args);
process.exit(0);
