import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'vite';

/** Builds the dashboard into web/dist and prints the initial JavaScript size (entry plus its static imports), gzipped. */
const root = path.dirname(fileURLToPath(import.meta.url));
const LIMIT_KB = 300;

await build({ root, logLevel: 'warn', configFile: path.join(root, 'vite.config.ts') });

type Chunk = { file: string; isEntry?: boolean; imports?: string[] };
const dist = path.join(root, 'dist');
const manifest = JSON.parse(readFileSync(path.join(dist, '.vite', 'manifest.json'), 'utf8')) as Record<string, Chunk>;
const initial = new Set<string>();
const visit = (key: string) => {
  const chunk = manifest[key];
  if (!chunk || initial.has(chunk.file)) return;
  initial.add(chunk.file);
  for (const dep of chunk.imports ?? []) visit(dep);
};
for (const [key, chunk] of Object.entries(manifest)) if (chunk.isEntry) visit(key);
let gzipped = 0;
for (const file of initial) gzipped += gzipSync(readFileSync(path.join(dist, file))).length;
const kb = gzipped / 1024;
console.log(`dashboard built: initial JS ${kb.toFixed(1)} KB gzipped (${initial.size} file${initial.size === 1 ? '' : 's'}; budget ${LIMIT_KB} KB)`);
if (kb > LIMIT_KB) {
  console.error(`initial JS exceeds the ${LIMIT_KB} KB budget`);
  process.exit(1);
}
