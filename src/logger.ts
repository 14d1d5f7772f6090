import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config.ts';
import { loggableError } from './loggable-error.ts';

/** JSON lines wait for this many bytes, or for the next second, before they are written. */
const LOG_WRITE_BYTES = 4096;
const LOG_FLUSH_MS = 1000;
/** Lines waiting for a stdout that does not drain are dropped beyond this, rather than held without bound. */
const LOG_MAX_WAITING_BYTES = 16 * 1024 * 1024;

/**
 * JSON lines, or one readable line per entry when stdout is a terminal (LOG_FORMAT forces either).
 * JSON lines are written in batches of 4 KB and at least once a second: the delivery worker logs
 * a line per message, and a write per line cost its event loop 47 µs a message (bench campaign's
 * CPU profile). pino writes what is left when the process exits,
 * so only a SIGKILL or a power cut can lose the last second. pino-pretty runs as a synchronous
 * stream in this thread rather than a worker transport, so the last lines before an exit (a
 * start-up failure, `stopped`) are never lost.
 */
export function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'>): Logger {
  const usePretty = config.logFormat === 'pretty' || (config.logFormat === undefined && process.stdout.isTTY === true);
  const options = { level: config.logLevel, serializers: { err: loggableError } };
  if (!usePretty) {
    const stdout = pino.destination({ dest: 1, sync: false, minLength: LOG_WRITE_BYTES, maxLength: LOG_MAX_WAITING_BYTES });
    // Flushed only after a line was logged: an idle process would otherwise write nothing every second.
    let logged = false;
    setInterval(() => {
      if (!logged) return;
      logged = false;
      stdout.flush();
    }, LOG_FLUSH_MS).unref();
    const streamWrite = (line: string) => {
      logged = true;
      return line;
    };
    return pino({ ...options, hooks: { streamWrite } }, stdout);
  }
  return pino(options, pretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
}
