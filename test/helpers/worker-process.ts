import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

type ProcessOptions = {
  databaseUrl: string;
  smtpUrl: string;
  dnsAddress: string;
  env?: Record<string, string>;
  logs: string[];
};

/**
 * A real Herald process (`src/main.ts`) in the given PROCESS_ROLE on the test database, for the
 * tests that run several processes or kill one with SIGKILL: its own DATA_DIR, the test
 * JWT_SECRET, output collected into `logs`.
 */
export async function spawnHerald(role: 'api' | 'worker', opts: ProcessOptions): Promise<ChildProcess> {
  const dataDir = await mkdtemp(path.join(tmpdir(), `herald-${role}-`));
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: path.resolve(import.meta.dirname, '..', '..'),
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: opts.databaseUrl,
      PROCESS_ROLE: role,
      SMTP_URL: opts.smtpUrl,
      DNS_SERVERS: opts.dnsAddress,
      JWT_SECRET: 'test-secret-0123456789abcdef',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  child.stdout?.on('data', (d: Buffer) => opts.logs.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => opts.logs.push(d.toString()));
  return child;
}

/** Kills `child` (SIGKILL) and resolves once it has exited, its DATA_DIR removed. */
export function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

/** A `PROCESS_ROLE=worker` Herald process (see spawnHerald). */
export const spawnWorker = (opts: ProcessOptions): Promise<ChildProcess> => spawnHerald('worker', opts);

/** Worker processes started on demand against one test environment; `killAll` ends those still running. */
export function workerProcesses(env: () => { databaseUrl: string; smtpUrl: string; dnsAddress: string; env?: Record<string, string> }) {
  const children: ChildProcess[] = [];
  const logs: string[] = [];
  return {
    logs,
    start: async (): Promise<ChildProcess> => {
      const child = await spawnWorker({ ...env(), logs });
      children.push(child);
      return child;
    },
    killAll: () => Promise.all(children.map(killed)),
  };
}
