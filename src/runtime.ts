import { Resolver } from 'node:dns/promises';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { type AppContext, type Clock, systemClock } from './context.ts';
import { openDatabase } from './db/client.ts';
import { startDatabaseServer } from './db/connect.ts';
import { watchDiskRoom } from './db/disk-room.ts';
import { runMigrations } from './db/migrate.ts';
import { createProjectCaches } from './cache/project-caches.ts';
import { hashLegacySecretKeys } from './http/api-keys.ts';
import { createKeyCache } from './http/key-cache.ts';
import { startJobs } from './jobs/boss.ts';
import { queues } from './jobs/registry.ts';
import { acceptedRecorder } from './modules/emails/delivery/accepted.ts';
import { engagementRecorder } from './modules/tracking/engagement.ts';
import { fieldDeleteSlots } from './modules/contacts/fields.ts';
import { eventDeleteSlots } from './modules/events/usage.ts';
import { heavyReadTime, heavyReads } from './http/heavy-reads.ts';
import { projectPurgeSlots } from './modules/projects/purge.ts';
import { cascadeDeleteSlots } from './modules/workflows/delete.ts';
import { slowAudienceLanes } from './modules/campaigns/turns.ts';
import { slowProjects } from './conditions/slow-projects.ts';
import { keyTurns } from './modules/domains/key-slots.ts';
import { rawDownloadSlots } from './modules/emails/raw-source.ts';
import { PREVIEWS_PER_PROCESS, PREVIEWS_PER_PROJECT, previewSlots } from './modules/templates/preview.ts';
import { createTransport } from './mail/transport.ts';
import { startWorkflowRunner } from './modules/workflows/jobs.ts';
import { createComposePool } from './render/compose-pool.ts';
import { loggableError } from './loggable-error.ts';
import { checkSecretAtStartup } from './modules/system/secret-check.ts';
import { StartupError } from './startup-error.ts';

export type Runtime = {
  ctx: AppContext;
  /** Where the data is: the embedded cluster's directory or the external server's host and database. */
  databaseLocation: string;
  /** Present when this process serves HTTP (PROCESS_ROLE api or all). */
  app: FastifyInstance | null;
  stop: () => Promise<void>;
};

/** Starts one Herald process: database (embedded or external), migrations, jobs, and the HTTP app. */
export async function startRuntime(config: Config, opts: { log?: Logger; clock?: Clock } = {}): Promise<Runtime> {
  // Whatever logger the caller gives, an `err` field is written without a database error's values.
  const log = (opts.log ?? pino({ level: config.logLevel })).child({}, { serializers: { err: loggableError } });
  const server = await startDatabaseServer({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  const stops: (() => Promise<void>)[] = [server.stop];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
  };
  try {
    const migrated = await runMigrations(server.url).catch((err: unknown) => {
      throw databaseStartError(err, server.location, config.databaseUrl !== undefined);
    });
    if (migrated.searchIndexes.state === 'unavailable')
      log.warn(
        { reason: migrated.searchIndexes.reason },
        'contact and suppression search run without their index: each search reads all of the project’s rows',
      );
    const database = openDatabase(server.url, config.databasePoolSize);
    stops.push(database.close);
    const mismatch = await checkSecretAtStartup(database, config.jwtSecret);
    if (mismatch) {
      const what = mismatch.against === 'dkim-keys' ? 'that encrypted the DKIM keys in this database' : "of this database's other Herald processes";
      const problem = `JWT_SECRET is not the secret ${what}${config.jwtSecretGenerated ? ` (this process generated its own into ${config.dataDir})` : ''}`;
      // Every role refuses: a worker could sign no mail, an API process would accept none of the
      // installation's API keys or sessions (and would hash legacy keys with the wrong secret).
      throw new StartupError(`${problem}: give every Herald process of this installation the same JWT_SECRET`);
    }
    await hashLegacySecretKeys(database, config.jwtSecret);
    const caches = createProjectCaches();
    const keys = await createKeyCache(database, server.url, log, config.jwtSecret, caches.evictProject);
    stops.push(keys.close);
    const dns = new Resolver({ timeout: 2000, tries: 2 });
    if (config.dnsServers.length > 0) dns.setServers(config.dnsServers);

    const mailer = createTransport(config);
    stops.push(mailer.close);

    // Stopped after the job workers (stops run in reverse), so messages in progress can finish.
    const threads = { compose: createComposePool() };
    stops.push(threads.compose.close);

    const runWorkers = config.processRole !== 'api';
    const jobs = await startJobs({ url: server.url, log, runWorkers, queues });
    stops.push(jobs.stop);
    const ctx: AppContext = {
      config,
      database,
      jobs,
      keys,
      caches,
      mailer,
      threads,
      previews: previewSlots(PREVIEWS_PER_PROJECT, PREVIEWS_PER_PROCESS),
      rawDownloads: rawDownloadSlots(),
      fieldDeletes: fieldDeleteSlots(),
      eventDeletes: eventDeleteSlots(),
      heavyReads: heavyReads(config.databasePoolSize, heavyReadTime(config.heavyReadSecondsPerMinute)),
      projectPurges: projectPurgeSlots(),
      cascadeDeletes: cascadeDeleteSlots(),
      slowAudienceReads: slowAudienceLanes(),
      slowReevaluations: slowProjects(),
      reputationChecks: new Map(),
      diskRoom: watchDiskRoom(config.databaseDisk, log),
      dkimKeyTurns: keyTurns(),
      recordAccepted: acceptedRecorder(() => ctx),
      recordEngagement: engagementRecorder(() => ctx),
      dns,
      log,
      clock: opts.clock ?? systemClock,
    };
    if (runWorkers) {
      await jobs.startWorkers(ctx);
      const runner = startWorkflowRunner(ctx);
      stops.push(runner.stop);
    }

    let app: FastifyInstance | null = null;
    if (config.processRole !== 'worker') {
      app = await buildApp(ctx);
      const httpApp = app;
      stops.push(() => httpApp.close());
    }
    return { ctx, app, databaseLocation: server.location, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', '28P01', '28000', '3D000']);

function databaseStartError(err: unknown, location: string, external: boolean): StartupError {
  const code = (err as { code?: string }).code;
  if (code && CONNECT_ERRORS.has(code)) {
    const fix = external ? "check that it is running and DATABASE_URL's host, port, user, password and database" : 'see the cause';
    return new StartupError(`Could not connect to PostgreSQL at ${location}: ${fix}`, { cause: err });
  }
  return new StartupError(`Applying the database migrations on ${location} failed`, { cause: err });
}
