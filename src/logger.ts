import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config.ts';
import { loggableError } from './loggable-error.ts';

/**
 * JSON lines, or one readable line per entry when stdout is a terminal (LOG_FORMAT forces either).
 * pino-pretty runs as a synchronous stream in this thread rather than a worker transport, so the
 * last lines before an exit (a start-up failure, `stopped`) are never lost.
 */
export function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'>): Logger {
  const usePretty = config.logFormat === 'pretty' || (config.logFormat === undefined && process.stdout.isTTY === true);
  const options = { level: config.logLevel, serializers: { err: loggableError } };
  if (!usePretty) return pino(options);
  return pino(options, pretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
}
