import { createHmac, createSecretKey } from 'node:crypto';
import { perSecret } from '../tokens/per-secret.ts';
import { signJwt, verifyJwt } from '../tokens/jwt.ts';

/**
 * Signed tokens for the unsubscribe, subscribe and manage links in emails: an HS256 JWT under a key
 * derived from the app secret, so a session token never verifies as a link token (or the reverse).
 * Links must keep working in old emails, so tokens live for five years.
 */

export type LinkAction = 'unsubscribe' | 'subscribe' | 'manage';

export type LinkToken = { projectId: string; contactId: string; action: LinkAction; emailId?: string };

const ACTIONS: readonly LinkAction[] = ['unsubscribe', 'subscribe', 'manage'];
const TTL_SECONDS = 5 * 365 * 24 * 3600;
const TYP = 'herald-link' as const;

// The key is the derived MAC's base64url text, as a KeyObject made once per secret: deriving it
// again for every token made each of the three links of a marketing email cost half as much again.
const linkKey = perSecret((secret) => createSecretKey(createHmac('sha256', secret).update('herald link tokens v1').digest('base64url'), 'utf8'));

export function signLinkToken(secret: string, t: LinkToken, now = Date.now()): string {
  const payload: Record<string, unknown> = { p: t.projectId, c: t.contactId, a: t.action };
  if (t.emailId) payload.e = t.emailId;
  return signJwt(TYP, payload, linkKey(secret), TTL_SECONDS, now);
}

/**
 * The project and contact of a link token signed with `secret`, expired or not: a genuine link that
 * no longer works still tells which project's contact is asking (for the "send me a fresh link"
 * form). Null when the signature is not ours.
 */
export function claimsOfSignedLinkToken(secret: string, token: string): { projectId: string; contactId: string } | null {
  if (typeof token !== 'string' || token.length > 2048) return null;
  const payload = verifyJwt(token, TYP, linkKey(secret), 0);
  return payload && typeof payload.p === 'string' && typeof payload.c === 'string' ? { projectId: payload.p, contactId: payload.c } : null;
}

/** The token's claims when it is a valid, unexpired link token signed with `secret`; otherwise null. */
export function verifyLinkToken(secret: string, token: string, now = Date.now()): LinkToken | null {
  if (typeof token !== 'string' || token.length > 2048) return null;
  const payload = verifyJwt(token, TYP, linkKey(secret), now);
  if (!payload) return null;
  const { p, c, a, e } = payload;
  if (typeof p !== 'string' || typeof c !== 'string' || !ACTIONS.includes(a as LinkAction)) return null;
  if (e !== undefined && typeof e !== 'string') return null;
  const out: LinkToken = { projectId: p, contactId: c, action: a as LinkAction };
  if (typeof e === 'string') out.emailId = e;
  return out;
}
