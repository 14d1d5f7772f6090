import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chmod } from 'node:fs/promises';
import { type EmbeddedServer, startEmbeddedPostgres } from '../../src/db/connect.ts';
import { ensureWebBuild } from '../../src/modules/web/build-state.ts';

/**
 * One PostgreSQL server for the whole `npm test` run; every test file creates its own database in it
 * (test/helpers/server.ts). The admin URL reaches the files through the environment.
 */
let server: EmbeddedServer | null = null;
let dir = '';

const quiet = { info: () => {}, debug: () => {}, error: (...a: unknown[]) => console.error(...a) };

export async function globalSetup(): Promise<void> {
  await ensureWebBuild(); // the dashboard tests need web/dist: built once per run when missing or stale
  if (process.env.HERALD_TEST_PG_URL) return; // an outer runner (or the developer) provides one
  dir = await mkdtemp(path.join(tmpdir(), 'herald-test-pg-'));
  await chmod(dir, 0o755); // the embedded server may run as the 'postgres' user
  server = await startEmbeddedPostgres(path.join(dir, 'data'), quiet as never);
  process.env.HERALD_TEST_PG_URL = server.urlFor('postgres');
}

export async function globalTeardown(): Promise<void> {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
