import { existsSync } from 'node:fs';

/**
 * The process's environment with `.env` from the working directory added, if there is one. A
 * variable already in the environment wins over the file's (Node's `loadEnvFile` does not
 * overwrite). Read by config.ts and by start-flags.ts, so both see the same PROCESS_ROLE.
 */
export function readEnv(): NodeJS.ProcessEnv {
  if (existsSync('.env')) process.loadEnvFile('.env');
  return process.env;
}
