/**
 * `npm run sdk:generate`: starts Herald on a throw-away embedded PostgreSQL (API only, no workers),
 * reads GET /openapi.json and writes sdk/src/operations.ts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startRuntime } from '../src/runtime.ts';
import { type OpenApiDocument, generateOperations } from './codegen.ts';

const SDK = import.meta.dirname;

const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-sdk-'));
try {
  const config = loadConfig({ DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent', PROCESS_ROLE: 'api', JWT_SECRET: 'sdk-generate-0123456789' });
  const runtime = await startRuntime(config, { log: pino({ level: 'silent' }) });
  try {
    if (!runtime.app) throw new Error('no HTTP app');
    const res = await runtime.app.inject('/openapi.json');
    if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}`);
    const doc = res.json() as OpenApiDocument;
    await writeFile(path.join(SDK, 'src', 'operations.ts'), generateOperations(doc));
    console.log(`sdk: ${Object.keys(doc.paths).length} paths read, sdk/src/operations.ts written`);
  } finally {
    await runtime.stop();
  }
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
