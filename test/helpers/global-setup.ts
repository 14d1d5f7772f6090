import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { chmod, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type EmbeddedServer, startEmbeddedPostgres } from '../../src/db/connect.ts';
import { processAlive } from '../../src/db/embedded.ts';
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
  removeAbandonedClusters();
  dir = await mkdtemp(path.join(tmpdir(), PREFIX));
  await chmod(dir, 0o755); // the embedded server may run as the 'postgres' user
  server = await startEmbeddedPostgres(path.join(dir, 'data'), quiet as never);
  process.env.HERALD_TEST_PG_URL = server.urlFor('postgres');
}

/**
 * `--test-force-exit` (package.json) ends the runner at this function's first `await`, which left
 * every run's cluster (about 2 GB) in the temporary directory; so after sending PostgreSQL its stop
 * signal, the rest is synchronous: wait for it to remove its pid file, then delete the directory.
 */
export async function globalTeardown(): Promise<void> {
  void server?.stop();
  if (!dir) return;
  const pidFile = path.join(dir, 'data', 'postmaster.pid');
  const pause = new Int32Array(new SharedArrayBuffer(4));
  // stop() asks for a "smart" shutdown and turns it "fast" on a timer, which cannot fire while this
  // thread waits; every test process has ended, so nothing is worth waiting for: "fast" at once.
  const postmaster = existsSync(pidFile) ? Number.parseInt(readFileSync(pidFile, 'utf8'), 10) : 0;
  if (postmaster > 0 && processAlive(postmaster)) process.kill(postmaster, 'SIGINT');
  for (const until = Date.now() + 30_000; existsSync(pidFile) && Date.now() < until;) Atomics.wait(pause, 0, 0, 50);
  // Retried: a PostgreSQL process still exiting can add a file while the tree is removed (ENOTEMPTY),
  // which once left a run's cluster half-deleted and without the pid file that marks it as ours.
  rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}

const PREFIX = 'herald-test-pg-';

/** Clusters that earlier runs left behind (killed, or before the teardown above): their runner is gone. */
function removeAbandonedClusters(): void {
  for (const name of readdirSync(tmpdir()).filter((n) => n.startsWith(PREFIX))) {
    const owned = path.join(tmpdir(), name);
    let owner = 0;
    try {
      owner = Number.parseInt(readFileSync(path.join(owned, 'herald.pid'), 'utf8'), 10);
    } catch {
      continue; // not ours, or a run still starting
    }
    if (processAlive(owner)) continue;
    if (existsSync(path.join(owned, 'data', 'postmaster.pid'))) continue; // a PostgreSQL may still run there
    try {
      rmSync(owned, { recursive: true, force: true });
    } catch {
      // Another user's, or in use in a way we cannot see: leave it; this run does not need it gone.
    }
  }
}
