import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';
import { StartupError } from '../startup-error.ts';
import { startEmbeddedPostgres } from './embedded.ts';

export { type EmbeddedServer, startEmbeddedPostgres } from './embedded.ts';

export type DatabaseServer = {
  /** Connection string for the application database. */
  url: string;
  /** Where the data is, for the start-up line: the embedded cluster's directory, or the URL's host and database. */
  location: string;
  /** Stops the embedded server; a no-op for an external DATABASE_URL. */
  stop: () => Promise<void>;
};

const EMBEDDED_DB = 'herald';
/** The role Herald connects as: owner of the `herald` database, not a superuser. */
const OWNER_ROLE = 'herald';
/** Herald before 0.2 created every embedded cluster with this superuser password. */
const LEGACY_SUPERUSER_PASSWORD = 'herald';
export const PASSWORDS_FILE = 'postgres-passwords.json';

type Passwords = { superuser: string; owner: string };

/** Returns the database to use: the configured URL, or an embedded PostgreSQL kept in `dataDir/postgres`. */
export async function startDatabaseServer(opts: { databaseUrl: string | undefined; dataDir: string; log: Logger }): Promise<DatabaseServer> {
  if (opts.databaseUrl) {
    const u = new URL(opts.databaseUrl);
    return { url: opts.databaseUrl, location: `${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`, stop: async () => {} };
  }
  const dir = path.join(opts.dataDir, 'postgres');
  await mkdir(opts.dataDir, { recursive: true });
  const passwords = readPasswords(opts.dataDir);
  const server = await startEmbeddedPostgres(dir, opts.log, {
    superuserPassword: passwords.superuser,
    legacyPasswords: [LEGACY_SUPERUSER_PASSWORD],
    ownerFile: path.join(opts.dataDir, 'herald.pid'),
  });
  try {
    await ensureOwnedDatabase(server.urlFor.bind(server), passwords.owner);
  } catch (err) {
    await server.stop();
    throw err instanceof StartupError ? err : new StartupError(`Could not prepare the embedded database in ${dir}`, { cause: err });
  }
  const url = `postgres://${OWNER_ROLE}:${encodeURIComponent(passwords.owner)}@127.0.0.1:${server.port}/${EMBEDDED_DB}`;
  return { url, location: dir, stop: server.stop };
}

/** The embedded cluster's passwords, generated once into DATA_DIR (mode 0600). */
function readPasswords(dataDir: string): Passwords {
  const file = path.join(dataDir, PASSWORDS_FILE);
  const read = (): Passwords => {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<Passwords>;
    if (typeof parsed.superuser !== 'string' || typeof parsed.owner !== 'string') throw new Error('missing fields');
    return { superuser: parsed.superuser, owner: parsed.owner };
  };
  try {
    if (existsSync(file)) return read();
    const fresh = { superuser: randomBytes(24).toString('base64url'), owner: randomBytes(24).toString('base64url') };
    try {
      writeFileSync(file, JSON.stringify(fresh) + '\n', { mode: 0o600, flag: 'wx' });
      return fresh;
    } catch {
      return read(); // another process created it first
    }
  } catch (err) {
    throw new StartupError(`${file} is unreadable: restore it from a backup (it holds the embedded database's passwords)`, { cause: err });
  }
}

/**
 * Creates (or converts) the `herald` role and database: Herald connects as the database's owner,
 * never as the superuser, which only runs this. A database made by an older Herald, owned by the
 * superuser with everything in it, is handed over to the owner role once.
 */
async function ensureOwnedDatabase(superuserUrl: (database: string) => string, ownerPassword: string): Promise<void> {
  const admin = new pg.Client({ connectionString: superuserUrl('postgres') });
  await admin.connect();
  let convert = false;
  try {
    const role = admin.escapeIdentifier(OWNER_ROLE);
    const secret = admin.escapeLiteral(ownerPassword);
    const roles = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [OWNER_ROLE]);
    if (roles.rowCount === 0) await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD ${secret}`);
    else await admin.query(`ALTER ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD ${secret}`);
    const db = await admin.query<{ owner: string }>('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [EMBEDDED_DB]);
    if (db.rowCount === 0) {
      await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(EMBEDDED_DB)} OWNER ${role}`);
    } else if (db.rows[0].owner !== OWNER_ROLE) {
      await admin.query(`ALTER DATABASE ${admin.escapeIdentifier(EMBEDDED_DB)} OWNER TO ${role}`);
      convert = true;
    }
  } finally {
    await admin.end();
  }
  if (!convert) return;
  const client = new pg.Client({ connectionString: superuserUrl(EMBEDDED_DB) });
  await client.connect();
  try {
    await client.query(HAND_OVER);
  } finally {
    await client.end();
  }
}

// Every schema, table, view, standalone sequence, routine and type the superuser owns outside the
// system schemas (and outside extensions) goes to the owner role. Identity and serial sequences
// follow their table.
const HAND_OVER = `
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT n.nspname FROM pg_namespace n
           WHERE n.nspowner = 'postgres'::regrole AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER SCHEMA %I OWNER TO ${OWNER_ROLE}', r.nspname);
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relowner = 'postgres'::regrole AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
             AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i', 'e'))
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO ${OWNER_ROLE}',
      CASE r.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
      r.name);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.proowner = 'postgres'::regrole AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO ${OWNER_ROLE}', r.name);
  END LOOP;
  FOR r IN SELECT t.oid::regtype AS name, t.typtype FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
           WHERE t.typowner = 'postgres'::regrole AND t.typtype IN ('e', 'd', 'r', 'm')
             AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype IN ('e', 'i'))
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO ${OWNER_ROLE}', CASE r.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, r.name);
  END LOOP;
END $$`;
