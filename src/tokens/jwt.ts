import { type KeyObject, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Minimal HS256 JWTs for dashboard sessions, account emails, invitations and link tokens (no HTTP here:
 * the render and mail code signs links with it too). Every token carries a
 * purpose (`typ`) and is only accepted where that purpose is expected: a verify-email token is
 * never a session, a session never resets a password.
 */

export type TokenType = 'session' | 'verify-email' | 'reset-password' | 'herald-link' | 'invitation';

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64url');
const HEADER = b64(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));

export function signJwt(typ: TokenType, payload: Record<string, unknown>, secret: string | KeyObject, ttlSeconds: number, now = Date.now()): string {
  const iat = Math.floor(now / 1000);
  const body = b64(JSON.stringify({ ...payload, typ, iat, exp: iat + ttlSeconds }));
  const sig = createHmac('sha256', secret).update(`${HEADER}.${body}`).digest('base64url');
  return `${HEADER}.${body}.${sig}`;
}

/** The payload of a valid, unexpired token of purpose `typ`, or null. */
export function verifyJwt(token: string, typ: TokenType, secret: string | KeyObject, now = Date.now()): Record<string, unknown> | null {
  if (typeof token !== 'string' || token.length > 4096) return null;
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== HEADER) return null;
  const expected = createHmac('sha256', secret).update(`${parts[0]}.${parts[1]}`).digest();
  const given = Buffer.from(parts[2], 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as Record<string, unknown>;
    if (!payload || typeof payload !== 'object' || payload.typ !== typ) return null;
    if (typeof payload.exp !== 'number' || payload.exp * 1000 <= now) return null;
    return payload;
  } catch {
    return null;
  }
}
