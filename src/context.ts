import type { Resolver } from 'node:dns/promises';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import type { Jobs } from './jobs/boss.ts';
import type { KeyCache } from './http/key-cache.ts';
import type { Transport } from './mail/transport.ts';

export type Clock = { now: () => Date };

export const systemClock: Clock = { now: () => new Date() };

/** Everything a service needs, passed explicitly: no module-level singletons. */
export type AppContext = {
  config: Config;
  database: Database;
  jobs: Jobs;
  keys: KeyCache;
  /** Where built messages go: the SMTP relay, or capture when SMTP_URL is unset. */
  mailer: Transport;
  dns: Resolver;
  log: Logger;
  clock: Clock;
};
