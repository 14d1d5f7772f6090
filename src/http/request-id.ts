import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps a sane incoming X-Request-ID (≤ 128 token characters), otherwise a new UUID. */
export function requestIdFor(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && SANE.test(incoming) ? incoming : randomUUID();
}
