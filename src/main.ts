import { ConfigError, loadConfig } from './config.ts';
import { queues } from './jobs/registry.ts';
import { createLogger } from './logger.ts';
import { keepMemoryReducerWorking, shrinkHeapAfterWork } from './memory-reducer.ts';
import { trimMallocPeriodically } from './native/malloc-trim.ts';
import { type Runtime, startRuntime } from './runtime.ts';
import { StartupError, describeStartupFailure } from './startup-error.ts';

let config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

const log = createLogger(config);
keepMemoryReducerWorking();
const mallocTrim = trimMallocPeriodically();
let runtime: Runtime | null = null;
let stopping = false;

// Installed before anything starts: a signal during start-up stops what has started so far
// once it is up, rather than killing the process and orphaning the embedded database.
const shutdown = (signal: string) => {
  if (stopping) return;
  stopping = true;
  if (!runtime) return; // start-up sees `stopping` and stops
  log.info({ signal }, 'shutting down');
  const force = setTimeout(() => {
    log.error('shutdown took longer than 15 s; exiting');
    process.exit(1);
  }, 15_000);
  force.unref();
  runtime.stop().then(
    () => {
      log.info('stopped');
      process.exit(0);
    },
    (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
};
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

try {
  const started = await startRuntime(config, { log });
  if (started.app) {
    await started.app.listen({ port: config.port, host: config.host }).catch(async (err: NodeJS.ErrnoException) => {
      await started.stop();
      if (err.code === 'EADDRINUSE') {
        throw new StartupError(`Port ${config.port} on ${config.host} is already in use (another Herald?): stop that program or set PORT`);
      }
      if (err.code === 'EACCES') throw new StartupError(`Not allowed to listen on port ${config.port}: use a port above 1023 or set PORT`);
      throw err;
    });
  }
  runtime = started;
  // Start-up is a burst of its own (migrations, module loading): give its garbage back once it is
  // over instead of waiting for V8's reducer, whose first turn comes anywhere from 8 to 25 s later.
  setTimeout(shrinkHeapAfterWork, 5_000).unref();
} catch (err) {
  for (const line of describeStartupFailure(err)) console.error(line);
  if (config.logLevel === 'debug' || config.logLevel === 'trace') console.error(err);
  process.exit(1);
}

const mail = config.smtpUrl
  ? `delivered through ${new URL(config.smtpUrl).host}`
  : 'captured, not delivered (SMTP_URL is not set): read it with GET /emails/:id/raw; send from any address @sandbox.herald.test without setting up a domain';
const workers = config.processRole === 'api' ? 0 : queues.reduce((n, q) => n + (q.workers ?? 1), 0);
log.info(
  { url: config.publicUrl, database: runtime.databaseLocation, mail: config.smtpUrl ? 'smtp' : 'capture', role: config.processRole, workers, mallocTrim },
  [
    runtime.app ? `Herald listening on ${config.publicUrl}` : 'Herald worker started',
    `database: ${runtime.databaseLocation}`,
    `role: ${config.processRole}, ${workers} job workers`,
  ].join(' · '),
);
log.info(`Mail is ${mail}`);
log.flush(); // whoever started the process waits for these lines
if (stopping) {
  stopping = false;
  shutdown('signal during start-up');
}
