import { Resolver } from 'node:dns/promises';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { type AppContext, type Clock, systemClock } from './context.ts';
import { openDatabase } from './db/client.ts';
import { startDatabaseServer } from './db/connect.ts';
import { runMigrations } from './db/migrate.ts';
import { createKeyCache } from './http/key-cache.ts';
import { startJobs } from './jobs/boss.ts';
import { queues } from './jobs/registry.ts';
import { createTransport } from './mail/transport.ts';

export type Runtime = {
  ctx: AppContext;
  /** Present when this process serves HTTP (PROCESS_ROLE api or all). */
  app: FastifyInstance | null;
  stop: () => Promise<void>;
};

/** Starts one Herald process: database (embedded or external), migrations, jobs, and the HTTP app. */
export async function startRuntime(config: Config, opts: { log?: Logger; clock?: Clock } = {}): Promise<Runtime> {
  const log = opts.log ?? pino({ level: config.logLevel });
  const server = await startDatabaseServer({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  const stops: (() => Promise<void>)[] = [server.stop];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
  };
  try {
    await runMigrations(server.url);
    const database = openDatabase(server.url, config.databasePoolSize);
    stops.push(database.close);
    const keys = await createKeyCache(database, server.url, log);
    stops.push(keys.close);
    const dns = new Resolver({ timeout: 2000, tries: 2 });
    if (config.dnsServers.length > 0) dns.setServers(config.dnsServers);

    const mailer = createTransport(config);
    stops.push(mailer.close);

    const runWorkers = config.processRole !== 'api';
    const jobs = await startJobs({ url: server.url, log, runWorkers, queues });
    stops.push(jobs.stop);
    const ctx: AppContext = { config, database, jobs, keys, mailer, dns, log, clock: opts.clock ?? systemClock };
    if (runWorkers) await jobs.startWorkers(ctx);

    let app: FastifyInstance | null = null;
    if (config.processRole !== 'worker') {
      app = await buildApp(ctx);
      const httpApp = app;
      stops.push(() => httpApp.close());
    }
    return { ctx, app, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
