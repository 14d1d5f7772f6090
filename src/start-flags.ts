import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readEnv } from './env-file.ts';

/**
 * The V8 flags `npm start` gives Node for a PROCESS_ROLE (docs/decisions.md § Memory): a smaller
 * young generation than V8's default everywhere, smaller still for a worker, which no request
 * waits on, and a worker's old generation grows to 2× what survived a full GC.
 */
export function nodeFlagsFor(role: string | undefined): string[] {
  return role === 'worker' ? ['--max-semi-space-size=4', '--heap-growing-percent=100'] : ['--max-semi-space-size=16'];
}

// package.json's start script runs this file and passes what it prints to `node src/main.ts`: the
// flags must be given before Node starts, and the role may come from `.env` as well as from the
// environment.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(nodeFlagsFor(readEnv().PROCESS_ROLE).join(' '));
}
